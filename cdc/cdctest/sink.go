package cdctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// Pipeline is the pipeline name the suite loads and saves checkpoints
// under. A sink that needs the name (for an ownership marker, a message
// id, a checkpoint row) is configured with it.
const Pipeline = "cdctest"

// Store is a checkpoint store, as pipeline.Checkpointer is.
type Store interface {
	Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error)
	Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error
}

// SinkHarness tells TestSink how to make the sink under test and how to
// read what it made durable.
type SinkHarness struct {
	// New returns a new, unopened sink. It is called with the
	// *testing.T of a subtest, several times in one subtest (a reopen is
	// a new sink): every sink made with the same t writes to the same
	// destination, and each t gets an empty one of its own (derive it
	// from t.Name(), or keep one per t).
	New func(t *testing.T) cdc.Sink

	// Committed returns what is durable at t's destination, one element
	// per record, in commit order: by default each record's Data.
	Committed func(t *testing.T) [][]byte

	// Record, if set, returns the i-th record the suite puts, for sinks
	// that need records of a certain shape (BSON documents, envelopes).
	// Each must have a distinct, JSON Pos, increasing with i. The default
	// is an insert with Pos {"cdctest":i} and a small JSON object as Data.
	Record func(i int) cdc.Record

	// Want, if set, returns what Committed returns for the i-th record;
	// by default its Data.
	Want func(i int) []byte

	// Checkpoints, if set, returns the checkpoint store a sink that keeps
	// the checkpoint itself supplies (the PostgreSQL sink's
	// Checkpoints). The suite then loads the checkpoint from it before
	// Open and saves to it after Commit, as the pipeline does. By default
	// the suite keeps checkpoints in memory.
	Checkpoints func(t *testing.T, s cdc.Sink) Store

	// VisibleBeforeCommit says that the sink may make records visible
	// before Commit returns (a JetStream sink publishes in Put and waits
	// for the acknowledgements in Commit), and relies on deduplication by
	// position when they are put again. The suite then does not require
	// uncommitted records to be gone after a reopen, only that putting
	// them again does not duplicate them.
	VisibleBeforeCommit bool

	// FailOpen, if set, returns a sink whose Open fails (an unreachable
	// server, a path it cannot create), to check that Close after a
	// failed Open returns nil, twice.
	FailOpen func(t *testing.T) cdc.Sink
}

// TestSink checks the sink contract of package cdc; see the package
// documentation for what it checks. Call it from a test of the sink's
// package.
func TestSink(t *testing.T, h SinkHarness) {
	t.Helper()
	if h.New == nil || h.Committed == nil {
		t.Fatal("cdctest: SinkHarness needs New and Committed")
	}
	t.Run("CommitMakesRecordsDurable", func(t *testing.T) {
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commit(0, 3)
		r.expect("after committing records 0-2", 0, 3)
		r.commit(3, 8)
		r.expect("after committing records 3-7", 0, 8)
		r.close()
		r.expect("after Close", 0, 8)
	})
	t.Run("UncommittedRecordsAreDropped", func(t *testing.T) {
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commit(0, 3)
		r.put(3, 6) // no Commit: a crash, or a failed batch
		r.close()
		r.open(r.pos(2))
		if !h.VisibleBeforeCommit {
			r.expect("after a reopen, with records 3-5 put and not committed", 0, 3)
		}
		r.commit(3, 6) // read again from the source after the restored position
		r.expect("after committing again the records put and not committed before the reopen", 0, 6)
		r.close()
	})
	t.Run("RestartResumesWithoutGapOrDuplicate", func(t *testing.T) {
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commit(0, 4)
		r.close()
		r.open(r.pos(3))
		r.expect("after a reopen from the checkpoint of record 3", 0, 4)
		r.commit(4, 7)
		r.close()
		r.open(r.pos(6))
		r.commit(7, 9)
		r.expect("after two reopens", 0, 9)
		r.close()
	})
	t.Run("PutDoesNotRetainBatch", func(t *testing.T) {
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commit(0, 5) // commit overwrites the records' memory after Put
		r.expect("with the batch's memory overwritten after Put", 0, 5)
		r.commit(5, 9)
		r.expect("with the memory of two batches overwritten after Put", 0, 9)
		r.close()
	})
	t.Run("CommitWithoutPut", func(t *testing.T) {
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commitMarker(-1) // a fresh pipeline's first batch may be markers only
		r.expect("after a Commit with no Put on a fresh sink", 0, 0)
		r.commit(0, 3)
		r.commitMarker(2)
		r.expect("after a Commit with no Put", 0, 3)
		r.close()
		r.open(r.markerPos(2))
		r.commit(3, 5)
		r.expect("after a reopen from the checkpoint of a Commit with no Put", 0, 5)
		r.close()
	})
	t.Run("CloseIsIdempotent", func(t *testing.T) {
		s := h.New(t)
		closeTwice(t, s, "a sink that was never opened")
		r := newSinkRun(t, &h)
		r.open(nil)
		r.commit(0, 1)
		closeTwice(t, r.sink, "an opened sink")
		if h.FailOpen != nil {
			s := h.FailOpen(t)
			if err := s.Open(t.Context(), nil); err == nil {
				t.Errorf("cdctest: Open of the sink FailOpen returned succeeded; want an error")
			}
			closeTwice(t, s, "a sink whose Open failed")
		}
	})
}

func closeTwice(t *testing.T, c interface{ Close() error }, what string) {
	t.Helper()
	for i := range 2 {
		if err := c.Close(); err != nil {
			t.Errorf("cdctest: Close #%d of %s = %v, want nil", i+1, what, err)
		}
	}
}

// sinkRun drives one subtest's sinks as the pipeline does.
type sinkRun struct {
	t     *testing.T
	h     *SinkHarness
	mem   *memStore
	sink  cdc.Sink
	store Store
}

func newSinkRun(t *testing.T, h *SinkHarness) *sinkRun {
	return &sinkRun{t: t, h: h, mem: &memStore{}}
}

func (r *sinkRun) record(i int) cdc.Record {
	if r.h.Record != nil {
		return cloneRecord(r.h.Record(i))
	}
	return DefaultRecord(i)
}

// DefaultRecord returns the i-th record TestSink puts when the harness
// has no Record: an insert into cdctest.records with Pos {"cdctest":i}
// and Data {"cdctest":i,"text":"record i"}.
func DefaultRecord(i int) cdc.Record {
	pos := fmt.Sprintf(`{"cdctest":%d}`, i)
	return cdc.Record{
		Event: cdc.Event{Pos: cdc.Position(pos), Op: cdc.OpInsert, Namespace: "cdctest.records"},
		Data:  fmt.Appendf(nil, `{"cdctest":%d,"text":"record %d"}`, i, i),
	}
}

func (r *sinkRun) want(i int) []byte {
	if r.h.Want != nil {
		return r.h.Want(i)
	}
	return r.record(i).Data
}

// pos returns the checkpoint position of record i.
func (r *sinkRun) pos(i int) cdc.Position { return r.record(i).Pos }

// markerPos returns the position of a marker after record i.
func (r *sinkRun) markerPos(i int) cdc.Position {
	return cdc.Position(fmt.Sprintf(`{"cdctest_marker":%d}`, i))
}

// open makes a new sink, loads its checkpoint and opens the sink from it;
// want is the position the checkpoint must name (nil: none).
func (r *sinkRun) open(want cdc.Position) {
	r.t.Helper()
	r.sink = r.h.New(r.t)
	r.store = r.mem
	if r.h.Checkpoints != nil {
		r.store = r.h.Checkpoints(r.t, r.sink)
	}
	cp, err := r.store.Load(r.t.Context(), Pipeline)
	if err != nil {
		r.t.Fatalf("cdctest: load checkpoint: %v", err)
	}
	switch {
	case want == nil && cp != nil:
		r.t.Fatalf("cdctest: a fresh destination has a checkpoint at %s", cp.Source)
	case want != nil && (cp == nil || !SamePosition(cp.Source, want)):
		got := "none"
		if cp != nil {
			got = string(cp.Source)
		}
		r.t.Fatalf("cdctest: restored checkpoint at %s, want the one last committed, at %s", got, want)
	}
	if err := r.sink.Open(r.t.Context(), cp); err != nil {
		r.t.Fatalf("cdctest: open sink from checkpoint %v: %v", describe(cp), err)
	}
	s := r.sink
	r.t.Cleanup(func() { _ = s.Close() }) // after a failure; Close is idempotent
}

func (r *sinkRun) close() {
	r.t.Helper()
	if err := r.sink.Close(); err != nil {
		r.t.Fatalf("cdctest: close sink: %v", err)
	}
}

// put puts records from..to-1 in one batch and then overwrites every
// byte of the batch, which the sink must not have retained. It returns
// the position of the last record.
func (r *sinkRun) put(from, to int) cdc.Position {
	r.t.Helper()
	batch := make([]cdc.Record, 0, to-from)
	for i := from; i < to; i++ {
		batch = append(batch, r.record(i))
	}
	last := slices.Clone(batch[len(batch)-1].Pos)
	if err := r.sink.Put(r.t.Context(), batch); err != nil {
		r.t.Fatalf("cdctest: put records %d-%d: %v", from, to-1, err)
	}
	for i := range batch {
		scribble(&batch[i])
	}
	clear(batch)
	return last
}

// commit runs records from..to-1 through the sink as one batch: Put,
// State, Commit, Save, CheckpointSaved.
func (r *sinkRun) commit(from, to int) {
	r.t.Helper()
	r.commitAt(r.put(from, to))
}

// commitMarker commits a batch of one marker after record i, with no Put.
func (r *sinkRun) commitMarker(i int) { r.t.Helper(); r.commitAt(r.markerPos(i)) }

func (r *sinkRun) commitAt(pos cdc.Position) {
	r.t.Helper()
	next := cdc.Checkpoint{Source: pos}
	if st, ok := r.sink.(cdc.Stater); ok {
		next.Sink = st.State()
	}
	if err := r.sink.Commit(r.t.Context(), next); err != nil {
		r.t.Fatalf("cdctest: commit batch up to %s: %v", pos, err)
	}
	if err := r.store.Save(r.t.Context(), Pipeline, next); err != nil {
		r.t.Fatalf("cdctest: save checkpoint at %s: %v", pos, err)
	}
	if o, ok := r.sink.(cdc.CheckpointObserver); ok {
		o.CheckpointSaved(next)
	}
}

// expect checks that the destination holds exactly records from..to-1.
func (r *sinkRun) expect(when string, from, to int) {
	r.t.Helper()
	want := make([][]byte, 0, to-from)
	for i := from; i < to; i++ {
		want = append(want, r.want(i))
	}
	if err := Compare(r.h.Committed(r.t), want); err != nil {
		r.t.Errorf("cdctest: %s: %v", when, err)
	}
}

// SamePosition reports whether a and b are the same position: the same
// bytes, or the same JSON value (a store may keep positions as JSON and
// give them back spaced or with their keys in another order).
func SamePosition(a, b cdc.Position) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// scribble overwrites every byte the record points to.
func scribble(rec *cdc.Record) {
	for _, b := range [][]byte{rec.Data, rec.Pos, rec.DocumentKey, rec.FullDocument, rec.PreImage,
		rec.UpdateDesc, rec.ResumeToken, rec.Extra, rec.Payload} {
		for i := range b {
			b[i] = '#'
		}
	}
}

func cloneRecord(rec cdc.Record) cdc.Record {
	rec.Data = slices.Clone(rec.Data)
	rec.Pos = slices.Clone(rec.Pos)
	rec.DocumentKey = slices.Clone(rec.DocumentKey)
	rec.FullDocument = slices.Clone(rec.FullDocument)
	rec.PreImage = slices.Clone(rec.PreImage)
	rec.UpdateDesc = slices.Clone(rec.UpdateDesc)
	rec.ResumeToken = slices.Clone(rec.ResumeToken)
	rec.Extra = slices.Clone(rec.Extra)
	rec.Payload = slices.Clone(rec.Payload)
	return rec
}

func describe(cp *cdc.Checkpoint) string {
	if cp == nil {
		return "none"
	}
	return fmt.Sprintf("{source %s, sink %s}", cp.Source, cp.Sink)
}

// memStore is the suite's checkpoint store for sinks that do not keep
// their own.
type memStore struct {
	mu sync.Mutex // guards cp
	cp *cdc.Checkpoint
}

func (m *memStore) Load(context.Context, string) (*cdc.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cp == nil {
		return nil, nil
	}
	cp := *m.cp
	return &cp, nil
}

func (m *memStore) Save(_ context.Context, _ string, cp cdc.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cp = &cp
	return nil
}
