package mongo

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
)

// gateSink counts the records it commits; while closed, Commit waits.
type gateSink struct {
	mu      sync.Mutex
	open    chan struct{}
	pending int
	count   atomic.Int64
}

func (s *gateSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *gateSink) Close() error                                { return nil }
func (s *gateSink) Put(_ context.Context, b []cdc.Record) error {
	s.mu.Lock()
	s.pending += len(b)
	s.mu.Unlock()
	return nil
}
func (s *gateSink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	s.mu.Lock()
	gate := s.open
	s.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	s.count.Add(int64(s.pending))
	s.pending = 0
	s.mu.Unlock()
	return nil
}

// A sink that blocks for a while (a database down) loses nothing: every
// change written meanwhile is delivered once it returns.
func TestBlockedSinkLosesNothing(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	sink := &gateSink{open: make(chan struct{})}
	close(sink.open)
	p := pipeline.New(pipeline.Config{Name: "blocked", CommitInterval: 100 * time.Millisecond}, New(cfg), encode.Envelope, sink, &checkpoint.Mem{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	<-p.Opened()

	n := int64(0)
	write := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			n++
			if _, err := e.coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(time.Second)
	sink.mu.Lock()
	sink.open = make(chan struct{})
	sink.mu.Unlock()
	write(20 * time.Second)
	sink.mu.Lock()
	close(sink.open)
	sink.mu.Unlock()
	write(time.Second)
	for deadline := time.Now().Add(20 * time.Second); sink.count.Load() < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d changes delivered; stats %+v", sink.count.Load(), n, p.Stats())
		}
	}
	if got := sink.count.Load(); got != n {
		t.Errorf("%d changes delivered, %d written", got, n)
	}
}
