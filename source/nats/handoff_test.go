package nats

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestQueueBoundedByMaxBufferedBytes: with nothing polled, the source
// queues no more bytes than three quarters of MaxBufferedBytes, however
// many messages its queue has room for, and then hands every message out
// in order.
func TestQueueBoundedByMaxBufferedBytes(t *testing.T) {
	const n, size = 100, 64 << 10
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "BIG", "big.>")
	big := func(i int) []byte {
		p := fmt.Appendf(nil, `{"n":%d,"pad":"`, i)
		p = append(p, bytes.Repeat([]byte{'x'}, size-len(p)-2)...)
		return append(p, '"', '}')
	}
	publish(t, js, "big.data", 0, n, big)

	cfg := jsConfig(t, nc, "BIG", "tide")
	cfg.MaxBufferedBytes = 1 << 20
	cfg.MaxAckPending = -1 // nothing bounds the deliveries but the budget
	src := openSource(t, cfg, nil)
	limit := int64(cfg.MaxBufferedBytes) / 4 * 3
	inUse := func() int64 { _, b := src.queue.queued(); return b }
	eventually(t, "queue full by bytes", func() bool { return inUse() > limit-2*size })
	items, used := src.queue.queued()
	if used > limit {
		t.Fatalf("queue holds %d bytes, budget %d", used, limit)
	}
	if q := items; q > int(limit/size)+1 {
		t.Fatalf("queue holds %d messages of %d bytes with a budget of %d", q, size, limit)
	}
	got := pollN(t, src, n)
	for i, ev := range got {
		if k := number(t, ev); k != i {
			t.Fatalf("event %d is message %d", i, k)
		}
	}
	if used := inUse(); used != 0 {
		t.Errorf("after everything was polled the budget holds %d bytes", used)
	}
}

func sized(n, size int) item {
	return item{ev: cdc.Event{Pos: cdc.Position(strconv.Itoa(n)), Size: size}}
}

// TestHandoffBounds: the reader waits when the queue holds maxItems
// items or maxBytes bytes, an event larger than the byte bound passes
// alone, and Poll's handing out makes room again.
func TestHandoffBounds(t *testing.T) {
	stop := make(chan struct{})
	h := newHandoff(3, 100)
	pushed := make(chan int, 10)
	go func() {
		for i, size := range []int{10, 10, 10, 10, 500, 10} {
			if _, ok := h.push(sized(i, size), stop); !ok {
				return
			}
			pushed <- i
		}
	}()
	for i := range 3 {
		if got := <-pushed; got != i {
			t.Fatalf("pushed %d, want %d", got, i)
		}
	}
	select {
	case i := <-pushed:
		t.Fatalf("item %d pushed past the count bound", i)
	case <-time.After(50 * time.Millisecond): // the reader stays blocked
	}
	it, ok, end := h.pop()
	if !ok || end || string(it.ev.Pos) != "0" {
		t.Fatalf("pop = %q %v %v", it.ev.Pos, ok, end)
	}
	h.handed(1, 10)
	if got := <-pushed; got != 3 {
		t.Fatalf("pushed %d, want 3", got)
	}
	// The 500-byte event waits until the queue is empty, then passes alone.
	for want := 1; want <= 3; want++ {
		if it, ok, _ := h.pop(); !ok || string(it.ev.Pos) != strconv.Itoa(want) {
			t.Fatalf("pop = %q %v, want %d", it.ev.Pos, ok, want)
		}
	}
	h.handed(2, 20)
	select {
	case i := <-pushed:
		t.Fatalf("item %d of 500 bytes pushed while 10 bytes were queued, bound 100", i)
	case <-time.After(50 * time.Millisecond):
	}
	h.handed(1, 10)
	if got := <-pushed; got != 4 {
		t.Fatalf("pushed %d, want 4", got)
	}
	if items, bytes := h.queued(); items != 1 || bytes != 500 {
		t.Fatalf("queued %d items of %d bytes, want 1 of 500", items, bytes)
	}
	select {
	case i := <-pushed:
		t.Fatalf("item %d pushed next to an event larger than the bound", i)
	case <-time.After(50 * time.Millisecond):
	}
	close(stop) // unblocks the reader: it gives up its item
	h.close()
	if it, ok, _ := h.pop(); !ok || string(it.ev.Pos) != "4" {
		t.Fatalf("pop = %q %v, want 4", it.ev.Pos, ok)
	}
	if _, ok, end := h.pop(); ok || !end {
		t.Fatalf("after close and the last item: ok %v end %v, want the end", ok, end)
	}
	if _, ok := h.push(sized(9, 1), make(chan struct{})); ok {
		t.Fatal("push after close succeeded")
	}
}

// TestHandoffFirstWakes: push reports the first item into an empty queue,
// so that the reader wakes the runtime once per batch of arrivals, and
// pop takes items in the order they were pushed across swaps.
func TestHandoffFirstWakes(t *testing.T) {
	stop := make(chan struct{})
	h := newHandoff(100, 1<<20)
	var firsts []int
	next := 0
	for round := range 3 {
		for i := range 5 {
			first, ok := h.push(sized(round*5+i, 1), stop)
			if !ok {
				t.Fatal("push refused")
			}
			if first {
				firsts = append(firsts, round*5+i)
			}
		}
		for {
			it, ok, end := h.pop()
			if end {
				t.Fatal("end before close")
			}
			if !ok {
				break
			}
			if string(it.ev.Pos) != strconv.Itoa(next) {
				t.Fatalf("popped %s, want %d", it.ev.Pos, next)
			}
			next++
			h.handed(1, 1)
		}
	}
	if !slices.Equal(firsts, []int{0, 5, 10}) {
		t.Fatalf("first pushes %v, want [0 5 10]", firsts)
	}
}

// TestCoreCloseWhileQueueFull: Close ends a core source whose delivery
// callback waits for room in a full queue, without waiting for Poll; the
// goroutine check of TestMain sees nothing left behind.
func TestCoreCloseWhileQueueFull(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	cfg := coreConfig(t, nc, "orders.>")
	cfg.QueueSize = 10
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	corePublish(t, nc, "orders.eu", 0, 100)
	eventually(t, "queue full", func() bool { n, _ := src.queue.queued(); return n == 10 })
	done := make(chan error, 1)
	go func() { done <- src.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(cfg.CloseTimeout):
		t.Fatal("Close waited for a reader blocked on a full queue")
	}
	var evs []cdc.Event
	var err error
	for err == nil {
		evs, err = src.Poll(t.Context(), evs, 100)
	}
	if !errors.Is(err, cdc.ErrEnd) || !strings.Contains(err.Error(), "closed") || len(evs) != 10 {
		t.Fatalf("after Close: %d events and %v, want the 10 queued and the end", len(evs), err)
	}
}
