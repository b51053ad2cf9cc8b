package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/pipeline"
)

// numbers is an upstream of numbered messages, shared by the sources that
// read it.
type numbers struct {
	mu   sync.Mutex
	msgs []string
}

func (u *numbers) add(msgs ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.msgs = append(u.msgs, msgs...)
}

// numberSource reads numbers; its position is {"n": the messages read}.
type numberSource struct {
	up    *numbers
	next  int
	ready chan struct{}
}

func newNumberSource(up *numbers) *numberSource {
	return &numberSource{up: up, ready: make(chan struct{}, 1)}
}

func (s *numberSource) Open(_ context.Context, restored *cdc.Checkpoint) error {
	if restored != nil {
		var p struct{ N *int }
		if err := json.Unmarshal(restored.Source, &p); err != nil || p.N == nil {
			return fmt.Errorf("number source: position %q is not {\"n\": N}", restored.Source)
		}
		s.next = *p.N
	}
	s.wake()
	return nil
}

// wake tells the pipeline to poll; a real source does so when its
// upstream has news.
func (s *numberSource) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *numberSource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	for ; s.next < len(s.up.msgs) && max > 0; max-- {
		s.next++
		buf = append(buf, cdc.Event{
			Pos: fmt.Appendf(nil, `{"n":%d}`, s.next), Op: cdc.OpInsert, Namespace: "numbers",
			Payload: []byte(s.up.msgs[s.next-1]), PayloadFormat: cdc.PayloadString,
		})
	}
	return buf, nil
}

func (s *numberSource) Ready() <-chan struct{} { return s.ready }
func (s *numberSource) Close() error           { return nil }

// listSink appends committed records to a list; put records wait in
// pending until Commit.
type listSink struct {
	mu        sync.Mutex
	pending   []string
	committed []string
	changed   chan struct{} // closed and replaced by every Commit
}

func newListSink() *listSink { return &listSink{changed: make(chan struct{})} }

func (s *listSink) Open(context.Context, *cdc.Checkpoint) error { return nil }

func (s *listSink) Put(_ context.Context, batch []cdc.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		s.pending = append(s.pending, string(r.Data)) // a copy: the sink must not retain batch
	}
	return nil
}

func (s *listSink) Commit(context.Context, cdc.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, s.pending...)
	s.pending = nil
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *listSink) Close() error { return nil }

// await waits until n records are committed and returns them.
func (s *listSink) await(n int) []string {
	for {
		s.mu.Lock()
		got, changed := s.committed, s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		<-changed
	}
}

func (s *listSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.committed)
}

// encodeText encodes a message as its text.
func encodeText(dst []byte, ev *cdc.Event) ([]byte, error) { return append(dst, ev.Payload...), nil }

// A custom source and sink, driven through Pause, Resume and Drain, then
// restarted on the same checkpoint store.
func Example() {
	ctx := context.Background()
	up := &numbers{}
	up.add("one", "two", "three")
	store := &checkpoint.Mem{}
	sink := newListSink()
	src := newNumberSource(up)
	p := pipeline.New(pipeline.Config{Name: "numbers"}, src, encodeText, sink, store)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	fmt.Println("committed:", strings.Join(sink.await(3), " "))

	// Paused, the pipeline commits nothing: what arrives waits upstream.
	if err := p.Pause(ctx); err != nil {
		fmt.Println("pause:", err)
		return
	}
	up.add("four", "five")
	src.wake()
	fmt.Println("paused:", p.State(), "- committed", sink.count())

	p.Resume()
	fmt.Println("resumed: committed", strings.Join(sink.await(5)[3:], " "))

	// Drain commits what is in flight, and Run returns nil.
	if err := p.Drain(ctx); err != nil {
		fmt.Println("drain:", err)
		return
	}
	fmt.Println("drained: Run returned", <-done, "- state", p.State(), "- events out", p.Stats().EventsOut)

	// A new pipeline on the same store continues at the next position.
	up.add("six")
	sink2 := newListSink()
	p2 := pipeline.New(pipeline.Config{Name: "numbers"}, newNumberSource(up), encodeText, sink2, store)
	go func() { done <- p2.Run(ctx) }()
	fmt.Println("after a restart: committed", strings.Join(sink2.await(1), " "))
	if err := p2.Drain(ctx); err != nil {
		fmt.Println("drain:", err)
		return
	}
	<-done
	cp, _ := store.Load(ctx, "numbers")
	fmt.Printf("checkpoint: %s\n", cp.Source)

	// Output:
	// committed: one two three
	// paused: paused - committed 3
	// resumed: committed four five
	// drained: Run returned <nil> - state stopped - events out 5
	// after a restart: committed six
	// checkpoint: {"n":6}
}

// brokenSink cannot open.
type brokenSink struct{ listSink }

func (*brokenSink) Open(context.Context, *cdc.Checkpoint) error { return errors.New("disk on fire") }

// Run in a goroutine of its own, a pipeline says when it has opened
// (Opened) and when Run returned (Done, then Err): a caller that waits
// for it to open waits for both, because one that fails to open never
// closes Opened.
func ExamplePipeline_Opened() {
	ctx := context.Background()
	for _, sink := range []cdc.Sink{newListSink(), &brokenSink{}} {
		up := &numbers{}
		p := pipeline.New(pipeline.Config{Name: "numbers"}, newNumberSource(up), encodeText, sink, &checkpoint.Mem{})
		go p.Run(ctx) // its result: p.Err, once p.Done is closed
		select {
		case <-p.Opened():
			fmt.Println("opened:", p.State())
			if err := p.Drain(ctx); err != nil {
				fmt.Println("drain:", err)
			}
		case <-p.Done():
			fmt.Println("failed to open:", p.Err())
		}
		<-p.Done()
		fmt.Println("done:", p.State(), p.Err())
	}

	// Output:
	// opened: running
	// done: stopped <nil>
	// failed to open: open sink: disk on fire
	// done: failed open sink: disk on fire
}
