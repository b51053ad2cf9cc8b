package nats

import "sync"

// handoff carries items from the source's one reader to Poll, bounded by
// a count and by the bytes of their events. An event larger than the
// whole byte bound still passes, alone.
//
// It is a mutex and two slices rather than a channel: Poll takes all that
// waits in one swap, so a message costs the reader one uncontended lock
// instead of a channel send, a wake-up select and a budget lock, and Poll
// no select per message. At 700k core messages a second those were a
// fifth of the core path's CPU in Tide's code.
type handoff struct {
	maxItems int
	maxBytes int64
	space    chan struct{} // one pending wake-up for a reader waiting for room

	mu     sync.Mutex // guards the fields below
	in     []item     // pushed, not yet taken by Poll
	items  int        // pushed and not yet handed out: in, and what Poll took
	bytes  int64      // the events' sizes of those items
	closed bool       // the reader pushes no more

	// Poll's side, touched only by Poll's goroutine.
	out  []item
	next int // the first item of out not yet handed out
}

func newHandoff(maxItems int, maxBytes int64) *handoff {
	return &handoff{maxItems: maxItems, maxBytes: maxBytes, space: make(chan struct{}, 1)}
}

// push queues it once there is room, reporting whether the queue was
// empty before (the reader then wakes the runtime), or returns ok false
// if stop is closed first or the handoff was closed.
func (h *handoff) push(it item, stop <-chan struct{}) (first, ok bool) {
	n := int64(it.ev.Size)
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return false, false
		}
		if h.items == 0 || (h.items < h.maxItems && h.bytes+n <= h.maxBytes) {
			first = len(h.in) == 0
			h.in = append(h.in, it)
			h.items++
			h.bytes += n
			h.mu.Unlock()
			return first, true
		}
		h.mu.Unlock()
		select {
		case <-h.space:
		case <-stop:
			return false, false
		}
	}
}

// close tells Poll that nothing more comes once it took what is queued.
func (h *handoff) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

// pop returns the next item for Poll, or ok false if none is queued; end
// is true once the handoff is closed and everything was taken.
func (h *handoff) pop() (it item, ok, end bool) {
	if h.next == len(h.out) {
		clear(h.out) // drop the references to handed-out events
		h.mu.Lock()
		h.out, h.in = h.in, h.out[:0]
		closed := h.closed
		h.mu.Unlock()
		h.next = 0
		if len(h.out) == 0 {
			return item{}, false, closed
		}
	}
	it = h.out[h.next]
	h.next++
	return it, true, false
}

// handed gives back the room of n items of nbytes that Poll handed out
// or dropped, waking a reader that waits for it.
func (h *handoff) handed(n int, nbytes int64) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	h.items -= n
	h.bytes -= nbytes
	h.mu.Unlock()
	select {
	case h.space <- struct{}{}:
	default:
	}
}

// queued returns the items and bytes pushed and not yet handed out.
func (h *handoff) queued() (items int, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.items, h.bytes
}
