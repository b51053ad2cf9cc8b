package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Honest fakes: a slice source, a memory sink and a memory checkpoint
// store. They record what they were asked to do in one shared, ordered
// log, so that tests can assert the order of put, commit, save and ack.

type callLog struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (l *callLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *callLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// pos returns the position of event i: JSON text, as cdc requires.
func pos(i int) cdc.Position { return cdc.Position(strconv.Itoa(i)) }

// events returns insert events from..to-1, each with payload "ev<i>".
func events(from, to int) []cdc.Event {
	var evs []cdc.Event
	for i := from; i < to; i++ {
		evs = append(evs, cdc.Event{Pos: pos(i), Op: cdc.OpInsert, Namespace: "db.c", Payload: []byte("ev" + strconv.Itoa(i))})
	}
	return evs
}

func marker(i int) cdc.Event { return cdc.Event{Pos: pos(i), Op: cdc.OpMarker} }

// testEncode encodes an event as its payload; the payload "bad" fails.
var errBadEvent = errors.New("bad event")

func testEncode(dst []byte, ev *cdc.Event) ([]byte, error) {
	if string(ev.Payload) == "bad" {
		return dst, errBadEvent
	}
	return append(dst, ev.Payload...), nil
}

// sliceSource hands out a slice of events, which a test may extend while
// the pipeline runs. It is an Acker and an Identifier.
type sliceSource struct {
	log *callLog

	mu       sync.Mutex // guards the fields below
	events   []cdc.Event
	next     int   // index of the next event to hand out
	end      bool  // return cdc.ErrEnd once every event was handed out
	endErr   error // with end: return this (wrapping cdc.ErrEnd) instead
	polls    int
	restored *cdc.Checkpoint
	acked    []string
	opened   bool
	closed   bool
	openErr  error
	pollErr  error
	ackErr   error
	closeErr error

	ready chan struct{} // one slot
}

func newSource(log *callLog, evs []cdc.Event) *sliceSource {
	return &sliceSource{log: log, events: evs, ready: make(chan struct{}, 1)}
}

func (s *sliceSource) Open(_ context.Context, restored *cdc.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("source open")
	s.restored = restored
	if s.openErr != nil {
		return s.openErr
	}
	if restored != nil && restored.Source != nil {
		i := slices.IndexFunc(s.events, func(ev cdc.Event) bool { return string(ev.Pos) == string(restored.Source) })
		if i < 0 {
			return fmt.Errorf("cannot seek to position %s: not in this source", restored.Source)
		}
		if restored.Meta["source"] != "slice" {
			return fmt.Errorf("checkpoint is for source %q, not slice", restored.Meta["source"])
		}
		s.next = i + 1
	}
	s.opened = true
	return nil
}

func (s *sliceSource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.polls++
	if s.pollErr != nil {
		return buf, s.pollErr
	}
	k := min(max, len(s.events)-s.next)
	buf = append(buf, s.events[s.next:s.next+k]...)
	s.next += k
	if s.end && s.next == len(s.events) {
		if s.endErr != nil {
			return buf, s.endErr
		}
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

func (s *sliceSource) Ready() <-chan struct{} { return s.ready }

// add makes more events available and signals Ready.
func (s *sliceSource) add(evs ...cdc.Event) {
	s.mu.Lock()
	s.events = append(s.events, evs...)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *sliceSource) finish() {
	s.mu.Lock()
	s.end = true
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *sliceSource) pollCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls
}

func (s *sliceSource) Ack(_ context.Context, upTo cdc.Position) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("ack %s", upTo)
	if s.ackErr != nil {
		return s.ackErr
	}
	s.acked = append(s.acked, string(upTo))
	return nil
}

func (s *sliceSource) ackedList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked)
}

func (s *sliceSource) Identity() map[string]string { return map[string]string{"source": "slice"} }

func (s *sliceSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("source close")
	s.closed = true
	return s.closeErr
}

func (s *sliceSource) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *sliceSource) isOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened && !s.closed
}

// memSink keeps records in memory: put records are pending until Commit.
type memSink struct {
	log *callLog

	mu        sync.Mutex // guards the fields below
	puts      [][]string // the data of each Put
	pending   []string
	committed []string
	commits   []cdc.Checkpoint
	restored  *cdc.Checkpoint
	closed    bool
	openErr   error
	putErr    error
	commitErr error
	closeErr  error
	putBlock  chan struct{} // if set, Put waits for it (or ctx)

	committedc chan int // if set, receives the committed count after each Commit
}

func newSink(log *callLog) *memSink { return &memSink{log: log} }

func (s *memSink) Open(_ context.Context, restored *cdc.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("sink open")
	s.restored = restored
	return s.openErr
}

func (s *memSink) Put(ctx context.Context, batch []cdc.Record) error {
	s.mu.Lock()
	block := s.putBlock
	s.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("put %d", len(batch))
	if s.putErr != nil {
		return s.putErr
	}
	var data []string
	for _, r := range batch {
		data = append(data, string(r.Data))
	}
	s.puts = append(s.puts, data)
	s.pending = append(s.pending, data...)
	return nil
}

func (s *memSink) Commit(_ context.Context, next cdc.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("commit %s", next.Source)
	if s.commitErr != nil {
		return s.commitErr
	}
	s.committed = append(s.committed, s.pending...)
	s.pending = nil
	s.commits = append(s.commits, next)
	if s.committedc != nil {
		s.committedc <- len(s.committed)
	}
	return nil
}

func (s *memSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.add("sink close")
	s.closed = true
	return s.closeErr
}

func (s *memSink) committedList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.committed)
}

func (s *memSink) putSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n []int
	for _, p := range s.puts {
		n = append(n, len(p))
	}
	return n
}

func (s *memSink) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// strictSink is a memSink that records every breach of the commit path's
// contract: an empty Put, or a marker handed to Put.
type strictSink struct {
	*memSink
	misuse []string
}

func (s *strictSink) Put(ctx context.Context, batch []cdc.Record) error {
	s.mu.Lock()
	if len(batch) == 0 {
		s.misuse = append(s.misuse, "empty put")
	}
	for _, r := range batch {
		if r.Op == cdc.OpMarker {
			s.misuse = append(s.misuse, "marker put at "+string(r.Pos))
		}
	}
	s.mu.Unlock()
	return s.memSink.Put(ctx, batch)
}

// ownStoreSink is a strictSink that keeps the checkpoint itself, written
// in its Commit as a transactional sink would, and reports its committed
// count as its state. Its Checkpoints is the pipeline's store.
type ownStoreSink struct {
	*strictSink
	saved []cdc.Checkpoint // guarded by mu
}

func (s *ownStoreSink) State() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]int{"committed": len(s.committed), "pending": len(s.pending)})
	return b
}

func (s *ownStoreSink) Checkpoints() sinkStore { return sinkStore{s} }

// sinkStore is an ownStoreSink's Checkpointer: Load reads the checkpoint
// of the last Commit, and Save only checks that the checkpoint it is given
// was committed, since Commit wrote it.
type sinkStore struct{ s *ownStoreSink }

func (c sinkStore) Load(_ context.Context, pipeline string) (*cdc.Checkpoint, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.log.add("sink load %s", pipeline)
	if len(c.s.commits) == 0 {
		return nil, nil
	}
	cp := c.s.commits[len(c.s.commits)-1]
	return &cp, nil
}

func (c sinkStore) Save(_ context.Context, _ string, cp cdc.Checkpoint) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.log.add("save %s", cp.Source)
	if !slices.ContainsFunc(c.s.commits, func(got cdc.Checkpoint) bool { return string(got.Source) == string(cp.Source) }) {
		c.s.misuse = append(c.s.misuse, "save of a checkpoint never committed: "+string(cp.Source))
	}
	c.s.saved = append(c.s.saved, cp)
	return nil
}

// memStore is an in-memory Checkpointer.
type memStore struct {
	log *callLog

	mu      sync.Mutex // guards the fields below
	cps     map[string]cdc.Checkpoint
	saves   int
	loadErr error
	saveErr error
}

func newStore(log *callLog) *memStore { return &memStore{log: log, cps: map[string]cdc.Checkpoint{}} }

func (m *memStore) Load(_ context.Context, pipeline string) (*cdc.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.add("load %s", pipeline)
	if m.loadErr != nil {
		return nil, m.loadErr
	}
	cp, ok := m.cps[pipeline]
	if !ok {
		return nil, nil
	}
	return &cp, nil
}

func (m *memStore) Save(_ context.Context, pipeline string, cp cdc.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.add("save %s", cp.Source)
	if m.saveErr != nil {
		return m.saveErr
	}
	m.cps[pipeline] = cp
	m.saves++
	return nil
}

func (m *memStore) get(pipeline string) (cdc.Checkpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.cps[pipeline]
	return cp, ok
}

// obsRecorder is an Observer that records what it is told.
type obsRecorder struct {
	mu        sync.Mutex // guards the fields below
	polled    int
	committed []int
	failed    []string
}

func (o *obsRecorder) Polled(n, _ int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polled += n
}

func (o *obsRecorder) Committed(n, _ int, _ time.Duration, _ cdc.Checkpoint) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.committed = append(o.committed, n)
}

func (o *obsRecorder) Failed(stage string, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed = append(o.failed, stage)
}

// want lists the payloads of events from..to-1.
func want(from, to int) []string {
	var w []string
	for i := from; i < to; i++ {
		w = append(w, "ev"+strconv.Itoa(i))
	}
	return w
}

// run starts p.Run in a goroutine and returns its result channel.
func run(ctx context.Context, p *Pipeline) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	return errc
}
