package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// CountingSink wraps a sink and closes Reached once a Commit has
// committed at least the records a benchmark waits for: how the
// throughput benchmarks see that a pipeline got through its input.
type CountingSink struct {
	cdc.Sink
	want    int
	reached chan struct{}

	mu     sync.Mutex
	n      int
	closed bool
}

// NewCountingSink returns s, counting, waiting for want records.
func NewCountingSink(s cdc.Sink, want int) *CountingSink {
	return &CountingSink{Sink: s, want: want, reached: make(chan struct{})}
}

// Reached is closed once want records are committed.
func (c *CountingSink) Reached() <-chan struct{} { return c.reached }

func (c *CountingSink) Put(ctx context.Context, b []cdc.Record) error {
	c.mu.Lock()
	c.n += len(b)
	c.mu.Unlock()
	return c.Sink.Put(ctx, b)
}

func (c *CountingSink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if err := c.Sink.Commit(ctx, next); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= c.want && !c.closed {
		close(c.reached)
		c.closed = true
	}
	return nil
}

// RunUntil runs run (a pipeline's Run) until reached is closed, then
// cancels it and waits for it to return; it returns how long that took
// from run's start. A run that ends before fails tb.
func RunUntil(tb testing.TB, run func(context.Context) error, reached <-chan struct{}) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- run(ctx) }() // owned by RunUntil: waited for below
	select {
	case <-reached:
	case err := <-done:
		tb.Fatalf("run: %v", err)
	}
	took := time.Since(t0)
	cancel()
	<-done
	return took
}
