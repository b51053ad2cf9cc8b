package generate

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, cfg Config, restored *cdc.Checkpoint) *Source {
	t.Helper()
	s := New(cfg)
	if err := s.Open(t.Context(), restored); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestEventShape(t *testing.T) {
	s := open(t, Config{Count: 2, PayloadBytes: 5}, nil)
	evs, err := s.Poll(t.Context(), nil, 10)
	if !errors.Is(err, cdc.ErrEnd) || len(evs) != 2 {
		t.Fatalf("Poll = %d events, %v; want 2 and ErrEnd", len(evs), err)
	}
	for i, ev := range evs {
		seq := int64(i + 1)
		if ev.Op != cdc.OpInsert || ev.Namespace != "gen.events" {
			t.Errorf("event %d: op %q namespace %q", seq, ev.Op, ev.Namespace)
		}
		if want := `{"seq":` + string(rune('0'+seq)) + `}`; string(ev.Pos) != want {
			t.Errorf("event %d: Pos %s, want %s", seq, ev.Pos, want)
		}
		var doc struct {
			ID      int64  `bson:"_id"`
			Seq     int64  `bson:"seq"`
			Payload string `bson:"payload"`
		}
		if err := bson.Raw(ev.FullDocument).Validate(); err != nil {
			t.Fatalf("event %d: full document is not valid BSON: %v", seq, err)
		}
		if err := bson.Unmarshal(ev.FullDocument, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ID != seq || doc.Seq != seq || doc.Payload != "xxxxx" {
			t.Errorf("event %d: full document %v", seq, bson.Raw(ev.FullDocument))
		}
		if got := bson.Raw(ev.FullDocument).String(); !strings.HasPrefix(got, `{"_id": {"$numberLong":`) {
			t.Errorf("event %d: _id is not the first field or not an int64: %s", seq, got)
		}
		key := bson.Raw(ev.DocumentKey)
		if err := key.Validate(); err != nil {
			t.Fatal(err)
		}
		elems, _ := key.Elements()
		if len(elems) != 1 || elems[0].Key() != "_id" || elems[0].Value().Int64() != seq {
			t.Errorf("event %d: document key %s, want {_id: %d}", seq, key, seq)
		}
		if ev.ClusterTime.T == 0 || ev.WallTimeMS == 0 || ev.Size == 0 {
			t.Errorf("event %d: cluster time %v, wall time %d, size %d", seq, ev.ClusterTime, ev.WallTimeMS, ev.Size)
		}
	}
	// Events share one allocation; appending to one must not overwrite
	// the next.
	before := string(evs[1].DocumentKey)
	_ = append(evs[0].Pos, "garbage"...)
	_ = append(evs[0].FullDocument, "garbage"...)
	if string(evs[1].DocumentKey) != before {
		t.Fatal("appending to an event overwrote its neighbour")
	}
}

func TestCountAndEnd(t *testing.T) {
	s := open(t, Config{Count: 5}, nil)
	ctx := t.Context()
	evs, err := s.Poll(ctx, nil, 3)
	if err != nil || len(evs) != 3 {
		t.Fatalf("first Poll = %d events, %v; want 3, nil", len(evs), err)
	}
	evs, err = s.Poll(ctx, evs[:0], 3)
	if !errors.Is(err, cdc.ErrEnd) || len(evs) != 2 || string(evs[1].Pos) != `{"seq":5}` {
		t.Fatalf("second Poll = %d events, %v; want the last 2 and ErrEnd", len(evs), err)
	}
	evs, err = s.Poll(ctx, nil, 3)
	if !errors.Is(err, cdc.ErrEnd) || len(evs) != 0 {
		t.Fatalf("Poll after the end = %d events, %v; want none and ErrEnd", len(evs), err)
	}
}

func TestForever(t *testing.T) {
	s := open(t, Config{}, nil)
	var evs []cdc.Event
	var err error
	for range 20 {
		if evs, err = s.Poll(t.Context(), evs[:0], 1000); err != nil || len(evs) != 1000 {
			t.Fatalf("Poll = %d events, %v", len(evs), err)
		}
	}
	if string(evs[999].Pos) != `{"seq":20000}` {
		t.Fatalf("last position %s", evs[999].Pos)
	}
	select {
	case <-s.Ready():
	default:
		t.Fatal("Ready is not ready without a rate")
	}
}

func TestResume(t *testing.T) {
	tests := map[string]struct {
		pos   string
		count int64
		first string // the first event's position, or "" for ErrEnd at once
	}{
		"middle":         {`{"seq":3}`, 5, `{"seq":4}`},
		"no position":    {``, 5, `{"seq":1}`},
		"zero":           {`{"seq":0}`, 0, `{"seq":1}`},
		"forever":        {`{"seq":123456789}`, 0, `{"seq":123456790}`},
		"at the end":     {`{"seq":5}`, 5, ``},
		"spaces in json": {`{ "seq" : 2 }`, 5, `{"seq":3}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := open(t, Config{Count: tc.count}, &cdc.Checkpoint{Source: cdc.Position(tc.pos)})
			evs, err := s.Poll(t.Context(), nil, 1)
			if tc.first == "" {
				if !errors.Is(err, cdc.ErrEnd) || len(evs) != 0 {
					t.Fatalf("Poll = %d events, %v; want ErrEnd", len(evs), err)
				}
				return
			}
			if len(evs) != 1 || string(evs[0].Pos) != tc.first {
				t.Fatalf("Poll = %v, %v; want first position %s", evs, err, tc.first)
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := map[string]struct {
		cfg  Config
		pos  string
		want string
	}{
		"not json":             {Config{}, `seq=3`, `checkpoint position "seq=3" is not {"seq": N}`},
		"resume token":         {Config{}, `{"_data":"82"}`, `is not {"seq": N}: it was not written by a generate source`},
		"no seq":               {Config{}, `{}`, `checkpoint position "{}" is not {"seq": N}`},
		"negative seq":         {Config{}, `{"seq":-4}`, `is not {"seq": N}`},
		"beyond count":         {Config{Count: 10}, `{"seq":11}`, "checkpoint position seq 11 is beyond count 10"},
		"negative count":       {Config{Count: -1}, ``, "count -1 is negative"},
		"negative rate":        {Config{Rate: -2}, ``, "rate -2 is not a non-negative number"},
		"negative payload":     {Config{PayloadBytes: -1}, ``, "payload_bytes -1 is negative"},
		"negative collections": {Config{Collections: -1}, ``, "collections -1 is not between 0 and"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := New(tc.cfg)
			err := s.Open(t.Context(), &cdc.Checkpoint{Source: cdc.Position(tc.pos)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{}).Poll(t.Context(), nil, 1); err == nil || !strings.Contains(err.Error(), "Poll before Open") {
		t.Fatalf("Poll before Open = %v", err)
	}
}

func TestRateWakesThroughReady(t *testing.T) {
	for _, rate := range []float64{10, 3, 7, 1000.0 / 3, 0.5, 123456} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) { testRate(t, rate, 40) })
	}
}

// testRate reads count events at rate the way the runtime does, waiting on
// Ready whenever Poll has nothing, and checks when each one arrived.
func testRate(t *testing.T, rate float64, count int64) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Count: count, Rate: rate})
		ctx := t.Context()
		if err := s.Open(ctx, nil); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := time.Now()
		var got []time.Duration // when each event was handed out
		for {
			select {
			case <-s.Ready():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			evs, err := s.Poll(ctx, nil, 100)
			for range evs {
				got = append(got, time.Since(start))
			}
			if errors.Is(err, cdc.ErrEnd) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				t.Fatalf("Ready fired at %v but no event was due: the source spins", time.Since(start))
			}
			// Nothing more is due until the timer fires: Ready must not be
			// ready yet, so an idle runtime sleeps.
			synctest.Wait()
			select {
			case <-s.Ready():
				t.Fatalf("Ready fired early at %v", time.Since(start))
			default:
			}
		}
		if int64(len(got)) != count {
			t.Fatalf("got %d events, want %d", len(got), count)
		}
		// Event k (from 0) is due k/rate seconds after Open, rounded up to
		// the nanosecond, and the timer wakes the reader exactly then.
		for k, at := range got {
			due := time.Duration(math.Ceil(float64(k) * float64(time.Second) / rate))
			if at != due {
				t.Fatalf("event %d handed out at %v, due at %v", k, at, due)
			}
		}
	})
}

func TestRateLimitsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Rate: 1000})
		if err := s.Open(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		time.Sleep(time.Second) // fake time: exactly one second passes
		evs, err := s.Poll(t.Context(), nil, 5000)
		if err != nil || len(evs) != 1001 { // seq 1 at once, then 1000 per second
			t.Fatalf("Poll after 1s at 1000/s = %d events, %v; want 1001", len(evs), err)
		}
		// max cut nothing here; with a smaller max the rest stays due and
		// Ready fires at once.
		time.Sleep(10 * time.Millisecond)
		evs, _ = s.Poll(t.Context(), nil, 4)
		if len(evs) != 4 {
			t.Fatalf("Poll = %d events, want 4", len(evs))
		}
		synctest.Wait()
		select {
		case <-s.Ready():
		default:
			t.Fatal("events are still due but Ready did not fire")
		}
	})
}

func BenchmarkPoll(b *testing.B) {
	s := New(Config{PayloadBytes: 100})
	if err := s.Open(b.Context(), nil); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var evs []cdc.Event
	b.ReportAllocs()
	for b.Loop() {
		evs, _ = s.Poll(b.Context(), evs[:0], 1000)
	}
}

// TestCollectionsRoundRobin: with collections: 3, seq goes to
// gen.events_<(seq-1)%3>, also after a resume.
func TestCollectionsRoundRobin(t *testing.T) {
	s := open(t, Config{Count: 7, Collections: 3}, &cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`)})
	evs, err := s.Poll(t.Context(), nil, 10)
	if !errors.Is(err, cdc.ErrEnd) {
		t.Fatalf("Poll: %v", err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Namespace)
	}
	want := "gen.events_1 gen.events_2 gen.events_0 gen.events_1 gen.events_2 gen.events_0"
	if strings.Join(got, " ") != want {
		t.Errorf("namespaces %v, want %s", got, want)
	}
	if err := (Config{Collections: MaxCollections + 1}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "collections: ") {
		t.Errorf("Validate of too many collections = %v", err)
	}
	one, _ := open(t, Config{Count: 1, Collections: 1}, nil).Poll(t.Context(), nil, 1)
	if len(one) != 1 || one[0].Namespace != Namespace {
		t.Errorf("collections: 1 gave %v, want one event in %s", one, Namespace)
	}
}
