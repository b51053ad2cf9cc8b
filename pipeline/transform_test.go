package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// evenOnly drops odd events, fails events whose payload is "poison",
// and upper-cases the rest, as a transform may.
type evenOnly struct{}

func (evenOnly) Apply(ev *cdc.Event) (bool, error) {
	if string(ev.Payload) == "poison" {
		ev.Payload = []byte("changed before failing")
		return false, errors.New("poisoned")
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(string(ev.Payload), "ev"))
	if n%2 == 1 {
		return false, nil
	}
	ev.Payload = []byte(strings.ToUpper(string(ev.Payload)))
	return true, nil
}

// memLetters is a dead-letter store in memory.
type memLetters struct {
	mu      sync.Mutex
	letters []cdc.DeadLetter
	err     error
}

func (m *memLetters) Write(_ context.Context, ls []cdc.DeadLetter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.letters = append(m.letters, ls...)
	return nil
}
func (m *memLetters) Close() error { return nil }

func poisoned(n int, bad ...int) []cdc.Event {
	evs := events(0, n)
	for _, b := range bad {
		evs[b].Payload = []byte("poison")
	}
	return evs
}

func TestTransformFiltersAndTheCheckpointMoves(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 1000))
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	p := New(Config{Name: "p", MaxRecords: 64, Workers: 3, Logger: discard(), Transform: evenOnly{}}, src, testEncode, sink, store)
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 1000; i += 2 {
		want = append(want, "EV"+strconv.Itoa(i))
	}
	if got := sink.committedList(); !slices.Equal(got, want) {
		t.Fatalf("committed %d records, want %d in order; first %q", len(got), len(want), got[:min(5, len(got))])
	}
	if cp, _ := store.get("p"); string(cp.Source) != "999" {
		t.Fatalf("checkpoint = %s, want 999 (the last event, filtered out)", cp.Source)
	}
	if acked := src.ackedList(); acked[len(acked)-1] != "999" {
		t.Fatalf("last ack = %v, want 999", acked)
	}
}

func TestTransformOnlyFilteredBatchesAdvance(t *testing.T) {
	log := &callLog{}
	evs := events(0, 200)
	for i := range evs {
		evs[i].Payload = []byte("ev1") // odd: every one dropped
	}
	src := newSource(log, evs)
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	p := New(Config{Name: "p", MaxRecords: 50, Logger: discard(), Transform: evenOnly{}}, src, testEncode, sink, store)
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.committedList(); len(got) != 0 {
		t.Fatalf("committed %q", got)
	}
	if cp, _ := store.get("p"); string(cp.Source) != "199" {
		t.Fatalf("checkpoint = %s, want 199", cp.Source)
	}
}

func TestOnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		onError OnError
		letters *memLetters
		wantErr string
	}{
		{name: "fail", onError: OnErrorFail, wantErr: "transform"},
		{name: "skip", onError: OnErrorSkip},
		{name: "dead letter", onError: OnErrorDeadLetter, letters: &memLetters{}},
		{name: "dead letter without a store", onError: OnErrorDeadLetter, wantErr: "no dead-letter store"},
		{name: "dead letter store fails", onError: OnErrorDeadLetter, letters: &memLetters{err: errors.New("disk full")}, wantErr: "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			src := newSource(log, poisoned(300, 10, 11, 250))
			src.end = true
			sink := newSink(log)
			store := newStore(log)
			cfg := Config{Name: "p", MaxRecords: 40, Workers: 2, Logger: discard(), Transform: evenOnly{}, OnError: tc.onError}
			if tc.letters != nil {
				cfg.DeadLetters = tc.letters
			}
			p := New(cfg, src, testEncode, sink, store)
			err := p.Run(t.Context())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run = %v, want an error with %q", err, tc.wantErr)
				}
				if cp, ok := store.get("p"); ok && atoi(string(cp.Source)) >= 10 {
					t.Fatalf("checkpoint %s passed the failed change", cp.Source)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := sink.committedList()
			var want []string
			for i := 0; i < 300; i += 2 {
				if i != 10 && i != 250 {
					want = append(want, "EV"+strconv.Itoa(i))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("committed %d, want %d", len(got), len(want))
			}
			st := p.Stats()
			if tc.letters != nil {
				if len(tc.letters.letters) != 3 || st.DeadLetters != 3 || st.Skipped != 0 {
					t.Fatalf("dead letters %d, stats %+v", len(tc.letters.letters), st)
				}
				for i, l := range tc.letters.letters {
					if want := []string{"10", "11", "250"}[i]; string(l.Event.Pos) != want || l.Stage != "transform" || l.Err != "poisoned" || string(l.Event.Payload) != "poison" || l.Time.IsZero() {
						t.Fatalf("letter %d = %+v, want the original change at %s", i, l, want)
					}
				}
			} else if st.Skipped != 3 || st.DeadLetters != 0 || st.LastError != "transform: poisoned" {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// letterSink is a memSink that keeps dead letters in its own commit.
type letterSink struct {
	*memSink
	pending, committed []cdc.DeadLetter
}

func (s *letterSink) PutDeadLetters(_ context.Context, ls []cdc.DeadLetter) error {
	s.pending = append(s.pending, ls...)
	return nil
}

func (s *letterSink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if err := s.memSink.Commit(ctx, next); err != nil {
		return err
	}
	s.committed = append(s.committed, s.pending...)
	s.pending = nil
	return nil
}

func TestDeadLettersInTheSinkTransaction(t *testing.T) {
	log := &callLog{}
	src := newSource(log, poisoned(100, 3, 50))
	src.end = true
	sink := &letterSink{memSink: newSink(log)}
	p := New(Config{Name: "p", MaxRecords: 10, Logger: discard(), Transform: evenOnly{}, OnError: OnErrorDeadLetter}, src, testEncode, sink, newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(sink.committed) != 2 || string(sink.committed[1].Event.Pos) != "50" {
		t.Fatalf("sink's dead letters = %+v", sink.committed)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// refusingSink refuses, at Commit, a batch holding a record whose data
// is "EV13" or "EV42", as a database refuses a row breaking a
// constraint: the whole batch is dropped.
type refusingSink struct {
	*memSink
}

func (s *refusingSink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	s.mu.Lock()
	bad := slices.Contains(s.pending, "EV13") || slices.Contains(s.pending, "EV42")
	if bad {
		s.pending = nil
	}
	s.mu.Unlock()
	if bad {
		return fmt.Errorf("check constraint violated: %w", cdc.ErrRefused)
	}
	return s.memSink.Commit(ctx, next)
}

func TestSinkRefusalSplitsTheBatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		onError OnError
		wantErr bool
	}{{"fail", OnErrorFail, true}, {"skip", OnErrorSkip, false}, {"dead letter", OnErrorDeadLetter, false}} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			src := newSource(log, events(0, 100))
			src.end = true
			sink := &refusingSink{memSink: newSink(log)}
			store := newStore(log)
			letters := &memLetters{}
			p := New(Config{Name: "p", MaxRecords: 64, Logger: discard(), Transform: upper{}, OnError: tc.onError, DeadLetters: letters},
				src, testEncode, sink, store)
			err := p.Run(t.Context())
			if tc.wantErr {
				if !errors.Is(err, cdc.ErrRefused) {
					t.Fatalf("Run = %v, want the refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range 100 {
				if i != 13 && i != 42 {
					want = append(want, "EV"+strconv.Itoa(i))
				}
			}
			if got := sink.committedList(); !slices.Equal(got, want) {
				t.Fatalf("committed %d records, want %d in order: %q", len(got), len(want), got)
			}
			if cp, _ := store.get("p"); string(cp.Source) != "99" {
				t.Fatalf("checkpoint = %s, want 99", cp.Source)
			}
			// Every commit's checkpoint moves forward.
			prev := -1
			for _, c := range sink.memSink.commits {
				if n := atoi(string(c.Source)); n < prev {
					t.Fatalf("checkpoints went back: %d after %d", n, prev)
				} else {
					prev = n
				}
			}
			st := p.Stats()
			if tc.onError == OnErrorDeadLetter {
				if len(letters.letters) != 2 || string(letters.letters[0].Event.Pos) != "13" || letters.letters[1].Stage != "sink" || st.DeadLetters != 2 {
					t.Fatalf("letters %+v, stats %+v", letters.letters, st)
				}
			} else if st.Skipped != 2 || len(letters.letters) != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// upper upper-cases payloads.
type upper struct{}

func (upper) Apply(ev *cdc.Event) (bool, error) {
	ev.Payload = []byte(strings.ToUpper(string(ev.Payload)))
	return true, nil
}
