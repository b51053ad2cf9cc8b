package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestInOrderDelivery(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 2500))
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	p := New(Config{Name: "p", MaxRecords: 100, Workers: 4, Logger: discard()}, src, testEncode, sink, store)

	if err := p.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := sink.committedList(); !slices.Equal(got, want(0, 2500)) {
		t.Fatalf("sink committed %d records out of order or incomplete; first %q", len(got), got[:min(5, len(got))])
	}
	for i, n := range sink.putSizes() {
		if n > 100 {
			t.Errorf("put %d has %d records, want <= 100", i, n)
		}
	}
	cp, ok := store.get("p")
	if !ok || string(cp.Source) != "2499" {
		t.Errorf("saved checkpoint = %q, want 2499", cp.Source)
	}
	acked := src.ackedList()
	if len(acked) == 0 || acked[len(acked)-1] != "2499" {
		t.Errorf("last ack = %v, want 2499", acked)
	}
	if p.State() != Stopped {
		t.Errorf("state = %v, want stopped", p.State())
	}
	st := p.Stats()
	if st.EventsIn != 2500 || st.EventsOut != 2500 || st.Batches < 25 || string(st.LastCheckpoint.Source) != "2499" || st.LastCommit.IsZero() {
		t.Errorf("stats = %+v", st)
	}
	if !src.isClosed() || !sink.isClosed() {
		t.Errorf("source closed %v, sink closed %v; want both closed", src.isClosed(), sink.isClosed())
	}
}

func TestEveryBatchTakesOnePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := &strictSink{memSink: newSink(log)}
		store := newStore(log)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
		errc := run(t.Context(), p)

		synctest.Wait()
		src.add(marker(3), marker(4)) // a batch of markers only
		synctest.Wait()
		if cp, _ := store.get("p"); string(cp.Source) != "4" {
			t.Errorf("after a marker batch the checkpoint is %q, want 4", cp.Source)
		}
		src.add(events(5, 7)...)
		synctest.Wait()
		if err := p.Drain(t.Context()); err != nil {
			t.Fatalf("Drain = %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v", err)
		}

		var got []string
		for _, c := range log.list() {
			if strings.HasPrefix(c, "put") || strings.HasPrefix(c, "commit") || strings.HasPrefix(c, "save") {
				got = append(got, c)
			}
		}
		// The batch of markers is committed with no Put.
		want := []string{"put 3", "commit 2", "save 2", "commit 4", "save 4", "put 2", "commit 6", "save 6"}
		if !slices.Equal(got, want) {
			t.Errorf("calls = %q, want %q", got, want)
		}
		if len(sink.misuse) > 0 {
			t.Errorf("contract breaches: %q", sink.misuse)
		}
	})
}

func TestSinkKeepsTheCheckpoint(t *testing.T) {
	log := &callLog{}
	sink := &ownStoreSink{strictSink: &strictSink{memSink: newSink(log)}}

	src := newSource(log, append(events(0, 5), marker(5)))
	src.end = true
	p := New(Config{Name: "p", MaxRecords: 3, Logger: discard()}, src, testEncode, sink, sink.Checkpoints())
	if err := p.Run(t.Context()); err != nil {
		t.Fatalf("first Run = %v", err)
	}
	// Batches waiting for the saver share one save of the newest
	// checkpoint: every save names a commit, in commit order, and the
	// last save names the last commit.
	if len(sink.saved) == 0 || len(sink.saved) > len(sink.commits) {
		t.Fatalf("the sink's store was given %d checkpoints for %d commits", len(sink.saved), len(sink.commits))
	}
	next := 0
	for _, sv := range sink.saved {
		for next < len(sink.commits) && string(sink.commits[next].Source) != string(sv.Source) {
			next++
		}
		if next == len(sink.commits) {
			t.Fatalf("saved checkpoint at %s names no commit after the previous save", sv.Source)
		}
		next++
	}
	if got, want := sink.saved[len(sink.saved)-1].Source, sink.commits[len(sink.commits)-1].Source; string(got) != string(want) {
		t.Errorf("last save at %s, want the last commit's %s", got, want)
	}
	last := sink.commits[len(sink.commits)-1]
	if string(last.Source) != "5" || last.Meta["source"] != "slice" || !bytes.Contains(last.Sink, []byte(`"pending":2`)) {
		t.Errorf("last checkpoint = {%s %v %s}, want position 5, the source identity, and state taken before commit", last.Source, last.Meta, last.Sink)
	}

	// Restart: the checkpoint comes from the sink, and reading resumes after it.
	src2 := newSource(log, append(append(events(0, 5), marker(5)), events(6, 9)...))
	src2.end = true
	sink.closed = false
	p2 := New(Config{Name: "p", Logger: discard()}, src2, testEncode, sink, sink.Checkpoints())
	if err := p2.Run(t.Context()); err != nil {
		t.Fatalf("second Run = %v", err)
	}
	if got := sink.committedList(); !slices.Equal(got, append(want(0, 5), want(6, 9)...)) {
		t.Errorf("committed = %q", got)
	}
	if len(sink.misuse) > 0 {
		t.Errorf("contract breaches: %q", sink.misuse)
	}
}

func TestCheckpointPersistsAndRestartResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		store := newStore(log)
		src := newSource(log, events(0, 5))
		sink := newSink(log)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
		errc := run(t.Context(), p)
		synctest.Wait()
		if err := p.Drain(t.Context()); err != nil {
			t.Fatalf("Drain = %v", err)
		}
		<-errc
		cp, ok := store.get("p")
		if !ok || string(cp.Source) != "4" || cp.Meta["source"] != "slice" {
			t.Fatalf("saved checkpoint = %+v, want position 4 with identity", cp)
		}

		src2 := newSource(log, events(0, 10))
		src2.end = true
		sink2 := newSink(log)
		p2 := New(Config{Name: "p", Logger: discard()}, src2, testEncode, sink2, store)
		if err := p2.Run(t.Context()); err != nil {
			t.Fatalf("second Run = %v", err)
		}
		if src2.restored == nil || string(src2.restored.Source) != "4" || sink2.restored == nil || string(sink2.restored.Source) != "4" {
			t.Errorf("restored: source %+v, sink %+v; want position 4 for both", src2.restored, sink2.restored)
		}
		if got := sink2.committedList(); !slices.Equal(got, want(5, 10)) {
			t.Errorf("after restart committed %q, want %q", got, want(5, 10))
		}
	})
}

func TestPauseStopsPollingAndResumeRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()

		if err := p.Pause(t.Context()); err != nil {
			t.Fatalf("Pause = %v", err)
		}
		if p.State() != Paused {
			t.Errorf("state = %v, want paused", p.State())
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 3)) {
			t.Errorf("committed before pause returned: %q", got)
		}
		polls := src.pollCount()
		src.add(events(3, 5)...)
		time.Sleep(time.Hour) // virtual time: nothing polls while paused
		synctest.Wait()
		if n := src.pollCount(); n != polls {
			t.Errorf("paused pipeline polled %d times", n-polls)
		}

		p.Resume()
		synctest.Wait()
		if p.State() != Running {
			t.Errorf("state after resume = %v, want running", p.State())
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 5)) {
			t.Errorf("committed after resume = %q", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatalf("Drain = %v", err)
		}
		<-errc
	})
}

func TestPauseDuringBatchWaitsForItsCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		sink.putBlock = make(chan struct{})
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait() // the batch is in Put, which blocks

		paused := make(chan error, 1)
		go func() { paused <- p.Pause(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-paused:
			t.Fatalf("Pause returned %v before the in-flight batch committed", err)
		default:
		}
		close(sink.putBlock)
		if err := <-paused; err != nil {
			t.Fatalf("Pause = %v", err)
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 3)) {
			t.Errorf("committed when Pause returned = %q", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatalf("Drain = %v", err)
		}
		<-errc
		if err := p.Pause(t.Context()); !errors.Is(err, ErrNotRunning) {
			t.Errorf("Pause after stop = %v, want ErrNotRunning", err)
		}
	})
}

func TestDeliveryFailureFails(t *testing.T) {
	errFull := errors.New("sink full")
	tests := map[string]struct {
		putErr, commitErr error
		want              string
		stage             string
		failedCall        string
	}{
		"put fails":    {putErr: errFull, want: "put 3 records: sink full", stage: "put", failedCall: "put 3"},
		"commit fails": {commitErr: errFull, want: "commit 3 records: sink full", stage: "commit", failedCall: "commit 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			log := &callLog{}
			src := newSource(log, events(0, 3))
			src.end = true
			sink := &strictSink{memSink: newSink(log)}
			sink.putErr, sink.commitErr = tc.putErr, tc.commitErr
			store := newStore(log)
			obs := &obsRecorder{}
			p := New(Config{Name: "p", Logger: discard(), Observer: obs}, src, testEncode, sink, store)

			err := p.Run(t.Context())
			if !errors.Is(err, errFull) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want %q (the original error)", err, tc.want)
			}
			// After the failed call the sink is only closed: it drops the
			// batch itself, and nothing else is asked of it.
			calls := log.list()
			i := slices.Index(calls, tc.failedCall)
			if i < 0 {
				t.Fatalf("calls = %q, want %q among them", calls, tc.failedCall)
			}
			for _, c := range calls[i+1:] {
				if strings.HasPrefix(c, "put") || strings.HasPrefix(c, "commit") || strings.HasPrefix(c, "save") {
					t.Errorf("after the failed %s: %q; want no further put, commit or save", tc.stage, c)
				}
			}
			if _, ok := store.get("p"); ok {
				t.Error("a checkpoint was saved for a batch that failed")
			}
			if a := src.ackedList(); len(a) > 0 {
				t.Errorf("acked %v after a failed delivery", a)
			}
			if p.State() != Failed {
				t.Errorf("state = %v, want failed", p.State())
			}
			if !slices.Contains(obs.failed, tc.stage) {
				t.Errorf("observer failures = %q, want %q", obs.failed, tc.stage)
			}
			if !src.isClosed() || !sink.isClosed() {
				t.Error("a failed pipeline must still close both ends")
			}
			if len(sink.misuse) > 0 {
				t.Errorf("contract breaches: %q", sink.misuse)
			}
		})
	}
}

func TestStartFailures(t *testing.T) {
	errDisk := errors.New("disk on fire")
	tests := map[string]struct {
		setup func(src *sliceSource, sink *memSink, store *memStore)
		want  string
	}{
		"checkpoint the source cannot seek to": {
			setup: func(_ *sliceSource, _ *memSink, store *memStore) {
				store.cps["p"] = cdc.Checkpoint{Source: pos(99), Meta: map[string]string{"source": "slice"}}
			},
			want: "open source: cannot seek to position 99",
		},
		"checkpoint of another source": {
			setup: func(_ *sliceSource, _ *memSink, store *memStore) {
				store.cps["p"] = cdc.Checkpoint{Source: pos(1), Meta: map[string]string{"source": "other"}}
			},
			want: `open source: checkpoint is for source "other"`,
		},
		"checkpoint load error": {
			setup: func(_ *sliceSource, _ *memSink, store *memStore) { store.loadErr = errDisk },
			want:  `load checkpoint "p": disk on fire`,
		},
		"sink open error": {
			setup: func(_ *sliceSource, sink *memSink, _ *memStore) { sink.openErr = errDisk },
			want:  "open sink: disk on fire",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			log := &callLog{}
			src := newSource(log, events(0, 3))
			sink := newSink(log)
			store := newStore(log)
			tc.setup(src, sink, store)
			p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
			err := p.Run(t.Context())
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error starting %q", err, tc.want)
			}
			if src.pollCount() != 0 || len(sink.putSizes()) != 0 {
				t.Errorf("a pipeline that failed at start polled %d times and put %d batches", src.pollCount(), len(sink.putSizes()))
			}
			if p.State() != Failed {
				t.Errorf("state = %v, want failed", p.State())
			}
		})
	}
}

func TestSaveErrorFailsWithoutAck(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 3))
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	store.saveErr = errors.New("store is read-only")
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)

	err := p.Run(t.Context())
	if !errors.Is(err, store.saveErr) || !strings.Contains(err.Error(), "save checkpoint at 2") {
		t.Fatalf("Run = %v, want the save error", err)
	}
	if got := sink.committedList(); !slices.Equal(got, want(0, 3)) {
		t.Errorf("committed = %q; the save comes after the commit", got)
	}
	if a := src.ackedList(); len(a) > 0 {
		t.Errorf("acked %v although the checkpoint was not saved", a)
	}
}

func TestAckAfterCommitAndSave(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 3))
	src.end = true
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []string{"load p", "sink open", "source open", "put 3", "commit 2", "save 2", "ack 2", "source close", "sink close"}
	if got := log.list(); !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
}

func TestAckErrorFails(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 3))
	src.end = true
	src.ackErr = errors.New("consumer deleted")
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
	err := p.Run(t.Context())
	if !errors.Is(err, src.ackErr) || !strings.Contains(err.Error(), "acknowledge source up to 2") {
		t.Fatalf("Run = %v, want the ack error", err)
	}
}

func TestCloseErrorSurfacesAfterCleanRun(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 3))
	src.end = true
	src.closeErr = errors.New("cursor leaked")
	sink := newSink(log)
	sink.closeErr = errors.New("fsync lost")
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
	err := p.Run(t.Context())
	if !errors.Is(err, src.closeErr) || !errors.Is(err, sink.closeErr) ||
		!strings.Contains(err.Error(), "close source: cursor leaked") || !strings.Contains(err.Error(), "close sink: fsync lost") {
		t.Fatalf("Run = %v, want both close errors", err)
	}
	if got := sink.committedList(); !slices.Equal(got, want(0, 3)) {
		t.Errorf("committed = %q", got)
	}
	if p.State() != Failed {
		t.Errorf("state = %v, want failed", p.State())
	}
}

func TestCaughtUpBatchIsOnePut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 37))
		sink := newSink(log)
		p := New(Config{Name: "p", Workers: 4, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()
		src.add(events(37, 600)...)
		synctest.Wait()
		if got := sink.putSizes(); !slices.Equal(got, []int{37, 563}) {
			t.Errorf("put sizes = %v, want every available record in one put: [37 563]", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

func TestMaxRecordsCapsEachPut(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 25))
	src.end = true
	sink := newSink(log)
	p := New(Config{Name: "p", MaxRecords: 10, Logger: discard()}, src, testEncode, sink, newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.putSizes(); !slices.Equal(got, []int{10, 10, 5}) {
		t.Errorf("put sizes = %v, want [10 10 5]", got)
	}
}

func TestMaxBytesCapsEachBatch(t *testing.T) {
	log := &callLog{}
	evs := events(0, 50)
	for i := range evs {
		evs[i].Size = 100 + i%7*50 // sizes vary: 100..400
	}
	src := newSource(log, evs)
	src.end = true
	sink := newSink(log)
	p := New(Config{Name: "p", MaxBytes: 1000, Logger: discard()}, src, testEncode, sink, newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.committedList(); !slices.Equal(got, want(0, 50)) {
		t.Fatalf("committed = %q", got)
	}
	i := 0
	for _, n := range sink.putSizes() {
		var size int
		for _, ev := range evs[i : i+n] {
			size += ev.Size
		}
		if size > 1000 {
			t.Errorf("a put of events %d..%d holds %d bytes, want <= 1000", i, i+n-1, size)
		}
		i += n
	}
}

func TestIdleSourceIsNotSpun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		sink := newSink(log)
		p := New(Config{Name: "p", CommitInterval: time.Millisecond, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()
		polls := src.pollCount()
		time.Sleep(time.Minute) // virtual: a minute of commit intervals
		synctest.Wait()
		if n := src.pollCount() - polls; n != 0 {
			t.Errorf("an idle source was polled %d times in a minute", n)
		}
		src.add(events(0, 2)...) // its signal wakes the pipeline
		synctest.Wait()
		if got := sink.committedList(); !slices.Equal(got, want(0, 2)) {
			t.Errorf("committed after the signal = %q", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

func TestDrainCommitsFinalBatchAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 4))
		sink := newSink(log)
		sink.putBlock = make(chan struct{})
		store := newStore(log)
		p := New(Config{Name: "p", MaxRecords: 2, Logger: discard()}, src, testEncode, sink, store)
		if p.State() != Starting {
			t.Errorf("state before Run = %v, want starting", p.State())
		}
		errc := run(t.Context(), p)
		synctest.Wait() // batch [0 1] is in Put; batch [2 3] waits behind it
		if p.State() != Running {
			t.Errorf("state = %v, want running", p.State())
		}

		drained := make(chan error, 1)
		go func() { drained <- p.Drain(t.Context()) }()
		synctest.Wait()
		if p.State() != Draining {
			t.Errorf("state while draining = %v, want draining", p.State())
		}
		src.add(events(4, 6)...) // read after the drain began: not delivered
		close(sink.putBlock)
		if err := <-drained; err != nil {
			t.Fatalf("Drain = %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 4)) {
			t.Errorf("committed = %q, want the batches in flight only", got)
		}
		if cp, _ := store.get("p"); string(cp.Source) != "3" {
			t.Errorf("checkpoint = %q, want 3", cp.Source)
		}
		if !src.isClosed() || !sink.isClosed() {
			t.Error("drain must close both ends")
		}
		if p.State() != Stopped {
			t.Errorf("state = %v, want stopped", p.State())
		}
	})
}

func TestHardStopCommitsNothingFurther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		sink.putBlock = make(chan struct{})
		store := newStore(log)
		ctx, cancel := context.WithCancel(t.Context())
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
		errc := run(ctx, p)
		synctest.Wait()
		cancel()
		err := <-errc
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if len(sink.committedList()) != 0 || store.saves != 0 || len(src.ackedList()) != 0 {
			t.Error("a hard stop committed, saved or acknowledged")
		}
		if !src.isClosed() || !sink.isClosed() {
			t.Error("a hard stop must still close both ends")
		}
	})
}

func TestEncodeErrorFailsWithTheFirstByPosition(t *testing.T) {
	log := &callLog{}
	evs := events(0, 400)
	evs[130].Payload = []byte("bad")
	evs[390].Payload = []byte("bad")
	src := newSource(log, evs)
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	obs := &obsRecorder{}
	p := New(Config{Name: "p", MaxRecords: 100, Workers: 4, Logger: discard(), Observer: obs}, src, testEncode, sink, store)
	err := p.Run(t.Context())
	if !errors.Is(err, errBadEvent) || !strings.Contains(err.Error(), "position 130") {
		t.Fatalf("Run = %v, want the encode error of event 130", err)
	}
	if got := sink.committedList(); len(got) > 100 || !slices.Equal(got, want(0, len(got))) {
		t.Errorf("committed %d records; nothing from the failed batch may be put", len(got))
	}
	if cp, ok := store.get("p"); ok && string(cp.Source) != "99" {
		t.Errorf("checkpoint = %q, want none or 99", cp.Source)
	}
	if !slices.Contains(obs.failed, "encode") {
		t.Errorf("observer failures = %q, want encode", obs.failed)
	}
}

func TestPollErrorFails(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 3))
	src.pollErr = errors.New("connection reset")
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
	if err := p.Run(t.Context()); !errors.Is(err, src.pollErr) || !strings.HasPrefix(err.Error(), "poll source: ") {
		t.Fatalf("Run = %v, want the poll error", err)
	}
}

func TestMarkerOnlyBatchCommitsItsPosition(t *testing.T) {
	log := &callLog{}
	src := newSource(log, []cdc.Event{marker(0), marker(1)})
	src.end = true
	sink := newSink(log)
	store := newStore(log)
	obs := &obsRecorder{}
	p := New(Config{Name: "p", Logger: discard(), Observer: obs}, src, testEncode, sink, store)
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.putSizes()); n != 0 {
		t.Errorf("markers were put (%d puts)", n)
	}
	if len(sink.commits) != 1 || string(sink.commits[0].Source) != "1" {
		t.Errorf("commits = %v, want one at position 1", sink.commits)
	}
	if cp, _ := store.get("p"); string(cp.Source) != "1" {
		t.Errorf("checkpoint = %q, want 1", cp.Source)
	}
	if obs.polled != 2 || !slices.Equal(obs.committed, []int{0}) {
		t.Errorf("observer polled %d, committed %v; want 2 and [0]", obs.polled, obs.committed)
	}
}

func TestRunTwiceFails(t *testing.T) {
	log := &callLog{}
	src := newSource(log, nil)
	src.end = true
	p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); !errors.Is(err, errRunTwice) {
		t.Fatalf("second Run = %v, want errRunTwice", err)
	}
}

// closed reports whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestRunInGoroutine controls a pipeline the way a user does: Run in a
// goroutine, Opened to wait until it runs, then Pause, Resume, Stats and
// Drain, and Done and Err to learn how it ended.
func TestRunInGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
		if closed(p.Opened()) || closed(p.Done()) {
			t.Fatal("Opened or Done closed before Run was called")
		}
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		select {
		case <-p.Opened():
		case <-p.Done():
			t.Fatalf("Run returned before opening: %v", p.Err())
		}
		if !src.isOpen() {
			t.Error("Opened closed before the source was open")
		}
		if closed(p.Done()) || p.Err() != nil {
			t.Errorf("a running pipeline: Done closed %v, Err %v", closed(p.Done()), p.Err())
		}
		synctest.Wait()
		if err := p.Pause(t.Context()); err != nil || p.State() != Paused {
			t.Fatalf("Pause = %v, state %v", err, p.State())
		}
		p.Resume()
		if st := p.Stats(); st.EventsOut != 3 {
			t.Errorf("stats = %+v, want 3 events out", st)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !closed(p.Done()) {
			t.Fatal("Drain returned before Done was closed")
		}
		if err := <-errc; err != nil || p.Err() != nil || p.State() != Stopped {
			t.Fatalf("Run = %v, Err = %v, state %v", err, p.Err(), p.State())
		}
		if !src.isClosed() || !sink.isClosed() {
			t.Error("Run returned without closing both ends")
		}
	})
}

// TestDoneWithoutOpened: a pipeline that fails before it opened closes
// Done, never Opened, and Err says why.
func TestDoneWithoutOpened(t *testing.T) {
	tests := map[string]func(src *sliceSource, sink *memSink, store *memStore){
		"checkpoint load error": func(_ *sliceSource, _ *memSink, store *memStore) { store.loadErr = errors.New("disk on fire") },
		"sink open error":       func(_ *sliceSource, sink *memSink, _ *memStore) { sink.openErr = errors.New("disk on fire") },
		"source open error": func(_ *sliceSource, _ *memSink, store *memStore) {
			store.cps["p"] = cdc.Checkpoint{Source: pos(99), Meta: map[string]string{"source": "slice"}}
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				src := newSource(log, events(0, 3))
				sink := newSink(log)
				store := newStore(log)
				setup(src, sink, store)
				p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, store)
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				select {
				case <-p.Opened():
					t.Fatal("Opened closed for a pipeline that failed to open")
				case <-p.Done():
				}
				err := <-errc
				if err == nil || p.Err() != err {
					t.Fatalf("Run = %v, Err = %v, want the same error", err, p.Err())
				}
				synctest.Wait()
				if closed(p.Opened()) {
					t.Error("Opened closed after Run failed to open")
				}
				if p.State() != Failed {
					t.Errorf("state = %v, want failed", p.State())
				}
			})
		})
	}
}

// TestDrainBeforeRunOpensThenStops: a pipeline drained before Run still
// opens, so Opened closes, and then stops.
func TestDrainBeforeRunOpensThenStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
		drained := make(chan error, 1)
		go func() { drained <- p.Drain(t.Context()) }()
		synctest.Wait()
		if closed(p.Done()) {
			t.Fatal("Done closed before Run was called")
		}
		if err := p.Run(t.Context()); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if err := <-drained; err != nil {
			t.Fatalf("Drain = %v", err)
		}
		if !closed(p.Opened()) || !closed(p.Done()) {
			t.Errorf("after a drained Run: Opened closed %v, Done closed %v; want both", closed(p.Opened()), closed(p.Done()))
		}
	})
}

func TestReadAheadIsBoundedToTwoBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 20))
		sink := newSink(log)
		sink.putBlock = make(chan struct{})
		p := New(Config{Name: "p", MaxRecords: 3, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait() // batch [0 1 2] is in Put
		if in := p.Stats().EventsIn; in != 6 {
			t.Errorf("with the first batch in Put, %d events were read; want 6: the next batch read ahead, no more", in)
		}
		close(sink.putBlock)
		synctest.Wait()
		if got := sink.committedList(); !slices.Equal(got, want(0, 20)) {
			t.Errorf("committed = %q", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

func TestMarkerOnlyBatchAdvancesASinkKeptCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 2))
		sink := &ownStoreSink{strictSink: &strictSink{memSink: newSink(log)}}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, sink.Checkpoints())
		errc := run(t.Context(), p)
		synctest.Wait()
		n := len(log.list())
		src.add(marker(2))
		synctest.Wait()
		// The sink keeps the checkpoint in its commit, so a batch of
		// markers gets a Commit with no Put, to advance it.
		if got := log.list()[n:]; !slices.Equal(got, []string{"commit 2", "save 2", "ack 2"}) {
			t.Errorf("calls for a marker batch = %q, want [commit 2 save 2 ack 2]", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
		if len(sink.misuse) > 0 {
			t.Errorf("contract breaches: %q", sink.misuse)
		}
		if cp, err := sink.Checkpoints().Load(t.Context(), "p"); err != nil || string(cp.Source) != "2" {
			t.Errorf("sink checkpoint = %v, %v; want position 2", cp, err)
		}
	})
}

// busySource always has more: each Poll takes 300 ms and returns exactly
// as many events as asked for, after a first poll of two large events.
type busySource struct {
	next int
}

func (s *busySource) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *busySource) Ready() <-chan struct{}                      { return nil }
func (s *busySource) Close() error                                { return nil }

func (s *busySource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	time.Sleep(300 * time.Millisecond)
	n, size := max, 1
	if s.next == 0 {
		n, size = 2, 400
	}
	for range n {
		buf = append(buf, cdc.Event{Pos: pos(s.next), Op: cdc.OpInsert, Payload: []byte("ev" + strconv.Itoa(s.next)), Size: size})
		s.next++
	}
	return buf, nil
}

func TestCommitIntervalClosesABatchStillFilling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sink := newSink(log)
		src := &busySource{}
		// After the first batch, polls are sized by the 400-byte average:
		// small, and always answered in full, so only the interval closes
		// the second batch.
		p := New(Config{Name: "p", MaxRecords: 1000, MaxBytes: 1000, CommitInterval: time.Second, Logger: discard()}, src, testEncode, sink, nil)
		errc := run(t.Context(), p)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sizes := sink.putSizes() // before the drain, which would close a batch too
		if len(sizes) < 2 || sizes[0] != 2 || sizes[1] >= 1000 || sizes[1] < 4 {
			t.Errorf("put sizes after 2s = %v, want [2 k ...] with the second batch (4 <= k < 1000) closed by the interval", sizes)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

func TestResumeBeforePauseTookEffectReleasesPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 3))
		sink := newSink(log)
		sink.putBlock = make(chan struct{})
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait() // the batch is in Put, so a pause cannot take effect

		paused := make(chan error, 1)
		go func() { paused <- p.Pause(t.Context()) }()
		synctest.Wait()
		p.Resume()
		if err := <-paused; err != nil {
			t.Fatalf("Pause = %v, want nil once Resume lifted it", err)
		}
		close(sink.putBlock)
		src.add(events(3, 5)...)
		synctest.Wait()
		if p.State() != Running {
			t.Errorf("state = %v, want running", p.State())
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 5)) {
			t.Errorf("committed = %q; the pipeline must still be reading", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

// gatedStore blocks every Save until the test lets it through.
type gatedStore struct {
	*memStore
	entered chan cdc.Position
	release chan struct{}
}

func (g *gatedStore) Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	g.entered <- cp.Source
	<-g.release
	return g.memStore.Save(ctx, pipeline, cp)
}

// TestSaveOverlapsNextCommit: while one batch's checkpoint is being saved,
// the next batches are written and committed, but nothing is acknowledged
// before its own save returns, saves keep commit order (batches waiting
// together share the save of the newest), and the committer runs at most
// saveQueue+1 batches ahead of the save in progress.
func TestSaveOverlapsNextCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, events(0, 20))
		src.end = true
		sink := newSink(log)
		store := &gatedStore{memStore: newStore(log), entered: make(chan cdc.Position), release: make(chan struct{})}
		p := New(Config{Name: "p", MaxRecords: 2, Logger: discard()}, src, testEncode, sink, store)
		errc := run(t.Context(), p)

		first := <-store.entered
		k, err := strconv.Atoi(string(first))
		if err != nil || k%2 != 1 {
			t.Fatalf("first save at %s, want the end of a batch", first)
		}
		synctest.Wait() // the first save is held; everything else is as far as it can get
		committed := sink.committedList()
		// The batches the held save covers, saveQueue waiting for the
		// saver, and one committed and waiting to queue.
		if want := min(20, k+1+2*(saveQueue+1)); len(committed) != want {
			t.Fatalf("with the save at %d held, committed %d events %q; want %d", k, len(committed), committed, want)
		}
		if acked := src.ackedList(); len(acked) != 0 {
			t.Fatalf("acknowledged %q before any save returned", acked)
		}
		go func() { // let the remaining saves through
			for range store.entered {
			}
		}()
		close(store.release)
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v", err)
		}
		close(store.entered)
		var saved []string
		for _, c := range log.list() {
			if strings.HasPrefix(c, "save ") {
				saved = append(saved, strings.TrimPrefix(c, "save "))
			}
		}
		prev := -1
		for _, sv := range saved {
			n, err := strconv.Atoi(sv)
			if err != nil || n%2 != 1 || n <= prev {
				t.Fatalf("saves %q, want batch ends in commit order", saved)
			}
			prev = n
		}
		if prev != 19 {
			t.Fatalf("saves %q, want the last at 19", saved)
		}
		if len(saved) >= 10 {
			t.Fatalf("saves %q: the batches queued behind the held save did not share one", saved)
		}
		if acked := src.ackedList(); !slices.Equal(acked, saved) {
			t.Fatalf("acks %q, want one per save %q, in order", acked, saved)
		}
	})
}

// A source that ends with a reason (an error wrapping cdc.ErrEnd, as an
// invalidated change stream does) still has every event committed, and
// Run reports the reason instead of a clean end.
func TestEndWithReasonCommitsThenFails(t *testing.T) {
	log := &callLog{}
	src := newSource(log, events(0, 250))
	src.end = true
	reason := fmt.Errorf("%w: collection dropped", cdc.ErrEnd)
	src.endErr = reason
	sink := newSink(log)
	store := newStore(log)
	p := New(Config{Name: "p", MaxRecords: 100, Logger: discard()}, src, testEncode, sink, store)

	err := p.Run(t.Context())
	if !errors.Is(err, reason) {
		t.Fatalf("Run = %v, want the source's end reason %v", err, reason)
	}
	if got := sink.committedList(); !slices.Equal(got, want(0, 250)) {
		t.Fatalf("sink committed %d records, want all 250 in order", len(got))
	}
	if cp, ok := store.get("p"); !ok || string(cp.Source) != "249" {
		t.Errorf("saved checkpoint = %q, want 249", cp.Source)
	}
	if p.State() != Failed {
		t.Errorf("state = %v, want failed", p.State())
	}
}

// TestGroupCommitWhileCommitterBusy: events that arrive one by one while
// the committer is still writing a batch wait in one open batch and are
// put together once it is done, instead of as one small batch each; a
// caught-up batch with the committer idle is put at once, without waiting
// for the commit interval.
func TestGroupCommitWhileCommitterBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		sink := newSink(log)
		block := make(chan struct{})
		sink.putBlock = block
		p := New(Config{Name: "p", CommitInterval: time.Hour, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()

		start := time.Now()
		src.add(events(0, 1)...)
		synctest.Wait() // batch [0] is in Put, blocked
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("a caught-up batch with the committer idle waited %v to be put", waited)
		}
		for i := 1; i < 4; i++ { // each is polled on its own
			src.add(events(i, i+1)...)
			synctest.Wait()
		}
		close(block)
		synctest.Wait()
		if got := sink.putSizes(); !slices.Equal(got, []int{1, 3}) {
			t.Errorf("put sizes = %v, want [1 3]: the three events that came during the first put share one batch", got)
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 4)) {
			t.Errorf("committed = %q", got)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the group commit waited %v of fake time, want none: it closes when the committer is done", waited)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

// TestGroupCommitBoundedByCommitInterval: a batch held open while the
// committer is busy closes at the commit interval even if the committer
// is still busy, so that it is next in line.
func TestGroupCommitBoundedByCommitInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		sink := newSink(log)
		block := make(chan struct{})
		sink.putBlock = block
		p := New(Config{Name: "p", CommitInterval: time.Second, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()
		src.add(events(0, 1)...)
		synctest.Wait()
		start := time.Now()
		src.add(events(1, 2)...)
		synctest.Wait() // held open, waiting for the committer or the interval
		src.add(events(2, 3)...)
		time.Sleep(2 * time.Second) // fake time: past the interval
		src.add(events(3, 4)...)    // goes into the next batch
		synctest.Wait()
		close(block)
		synctest.Wait()
		if got := sink.putSizes(); !slices.Equal(got, []int{1, 2, 1}) {
			t.Errorf("put sizes = %v, want [1 2 1]", got)
		}
		if elapsed := time.Since(start); elapsed != 2*time.Second {
			t.Errorf("elapsed %v", elapsed)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

// slowCommitSink is a memSink whose Commit takes d (fake time, under
// synctest), as an fsync does.
type slowCommitSink struct {
	*memSink
	d time.Duration
}

func (s *slowCommitSink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	time.Sleep(s.d)
	return s.memSink.Commit(ctx, next)
}

// TestCaughtUpBatchLingersForACommit: with the committer idle, a batch
// caught up with a source still delivering stays open for as long as the
// last commit took, counted from when it first caught up, and no longer;
// events that come later go into the next batch.
func TestCaughtUpBatchLingersForACommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := newSource(log, nil)
		sink := &slowCommitSink{memSink: newSink(log), d: 4 * time.Millisecond}
		p := New(Config{Name: "p", CommitInterval: time.Hour, Logger: discard()}, src, testEncode, sink, newStore(log))
		errc := run(t.Context(), p)
		synctest.Wait()
		src.add(events(0, 1)...) // the first batch: no commit time known yet, put at once
		synctest.Wait()
		time.Sleep(10 * time.Millisecond) // committed (4 ms), and idle
		if got := sink.putSizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("put sizes = %v, want [1]", got)
		}
		for i := 1; i < 8; i++ { // one event a millisecond
			src.add(events(i, i+1)...)
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		time.Sleep(20 * time.Millisecond)
		// 1..4 came within the 4 ms the batch lingered after event 1 caught
		// it up; 5..7 came after it closed, and form the next batch.
		if got := sink.putSizes(); !slices.Equal(got, []int{1, 4, 3}) {
			t.Errorf("put sizes = %v, want [1 4 3]", got)
		}
		if got := sink.committedList(); !slices.Equal(got, want(0, 8)) {
			t.Errorf("committed = %q", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

// slowStore is a memStore whose Save takes d (fake time, under synctest).
type slowStore struct {
	*memStore
	d time.Duration
}

func (s *slowStore) Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	time.Sleep(s.d)
	return s.memStore.Save(ctx, pipeline, cp)
}

// ackGatedSource delivers its next event only once the previous one was
// acknowledged, as JetStream does at max_ack_pending.
type ackGatedSource struct {
	*sliceSource
	next, last int
}

func (s *ackGatedSource) Ack(ctx context.Context, upTo cdc.Position) error {
	if err := s.sliceSource.Ack(ctx, upTo); err != nil {
		return err
	}
	if s.next < s.last {
		s.add(events(s.next, s.next+1)...)
		s.next++
	}
	return nil
}

// TestSlowSavesNotSpacedForAnAckGatedSource: the spacing of a slow
// store's saves never makes a source that waits for its acknowledgements
// wait longer: with no batch on its way to the sink, each save starts at
// once.
func TestSlowSavesNotSpacedForAnAckGatedSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := &ackGatedSource{sliceSource: newSource(log, events(0, 1)), next: 1, last: 5}
		store := &slowStore{memStore: newStore(log), d: time.Millisecond}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), store)
		start := time.Now()
		errc := run(t.Context(), p)
		for len(src.ackedList()) < 5 {
			time.Sleep(100 * time.Microsecond) // fake time
		}
		// Five saves of 1 ms one after the other, nothing else takes
		// fake time; spaced saves would have waited 3 ms before each.
		if took := time.Since(start); took > 6*time.Millisecond {
			t.Errorf("five ack-gated batches took %v, want about 5 ms: a save waited for spacing", took)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-errc
	})
}

// waitingSource is a source whose Open waits, as for a server that does
// not answer, until its context ends.
type waitingSource struct {
	*sliceSource
	waiting chan struct{}
}

func (s waitingSource) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	close(s.waiting)
	<-ctx.Done()
	return fmt.Errorf("waiting for the server: %w", ctx.Err())
}

// TestDrainWhileOpening: a drain while the source is still opening (its
// server unreachable) stops Run at once, with no error: nothing was read,
// so nothing is left to commit. Cancelling Run's context instead is still
// a hard stop, with the error.
func TestDrainWhileOpening(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := waitingSource{newSource(log, events(0, 3)), make(chan struct{})}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
		errc := run(t.Context(), p)
		<-src.waiting
		if err := p.Drain(t.Context()); err != nil {
			t.Fatalf("Drain while the source opens = %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run drained while the source opened = %v, want nil", err)
		}
		if st := p.Stats(); st.EventsIn != 0 || st.Batches != 0 {
			t.Errorf("stats after a drain before the source opened: %+v; want nothing read or committed", st)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		src := waitingSource{newSource(log, events(0, 3)), make(chan struct{})}
		p := New(Config{Name: "p", Logger: discard()}, src, testEncode, newSink(log), newStore(log))
		ctx, cancel := context.WithCancel(t.Context())
		errc := run(ctx, p)
		<-src.waiting
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("Run whose context was cancelled while the source opened = nil, want the error")
		}
	})
}
