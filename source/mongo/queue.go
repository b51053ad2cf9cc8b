package mongo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// queue is the hand-off between the reader goroutine and Poll, bounded in
// bytes (each event is charged its Size). The reader blocks in push while
// the queue is full; Poll never blocks. After fail, Poll hands out what is
// queued and then the error.
type queue struct {
	max   int64
	ready chan struct{} // one pending wake-up for the runtime

	// stalled, if set, is called when a push has waited stallAfter for
	// room: the pipeline has stopped taking events (a stalled sink). It
	// is called again only after poll has emptied half of the queue.
	stalled func()

	mu sync.Mutex // guards the fields below
	// events[head:] are queued, oldest first. Poll takes from the front
	// by moving head, and push compacts the slice in place once the dead
	// front is at least half of it, so that a queue kept full by a reader
	// ahead of its pipeline moves each event once instead of growing (and
	// copying) its whole backing array again and again.
	events []cdc.Event
	head   int
	bytes  int64
	peak   int64
	err    error         // set by fail; returned once events is empty
	space  chan struct{} // closed and replaced when bytes are freed
	calmed bool          // stalled was called, and the queue has not been half emptied since
}

// stallAfter is how long a push waits for room before the queue calls
// stalled: longer than a pipeline takes to poll again between batches,
// but a fraction of a sink's stall (and the call is once per half a
// budget read, so a slow sink pays one collection per half budget).
const stallAfter = 250 * time.Millisecond

// maxIdleQueue is the capacity, in events, that an emptied queue keeps
// for the next push.
const maxIdleQueue = 4096

func newQueue(max int64) *queue {
	return &queue{max: max, ready: make(chan struct{}, 1), space: make(chan struct{})}
}

// push appends ev, waiting while the queue has no room for it. An event
// larger than the whole budget is an error, not a deadlock.
func (q *queue) push(ctx context.Context, ev cdc.Event) error {
	size := int64(ev.Size)
	if size > q.max {
		return fmt.Errorf("%w: a %s event of %d bytes exceeds max_buffered_bytes (%d); raise max_buffered_bytes",
			ErrEventTooLarge, ev.Op, size, q.max)
	}
	var stall <-chan time.Time // armed at the first wait of this push
	for {
		q.mu.Lock()
		if q.bytes+size <= q.max {
			if len(q.events) == cap(q.events) && q.head >= len(q.events)/2 {
				n := copy(q.events, q.events[q.head:])
				clear(q.events[max(n, q.head):]) // poll cleared the front
				q.events, q.head = q.events[:n], 0
			}
			q.events = append(q.events, ev)
			q.bytes += size
			q.peak = max(q.peak, q.bytes)
			q.mu.Unlock()
			q.wake()
			return nil
		}
		space, calmed := q.space, q.calmed
		q.mu.Unlock()
		if stall == nil && q.stalled != nil && !calmed {
			t := time.NewTimer(stallAfter)
			defer t.Stop()
			stall = t.C
		}
		select {
		case <-space:
		case <-stall:
			q.mu.Lock()
			q.calmed = true
			q.mu.Unlock()
			q.stalled()
			stall = make(chan time.Time) // once per push: never fires again
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail records the reader's last word: cdc.ErrEnd or an error.
func (q *queue) fail(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.mu.Unlock()
	q.wake()
}

func (q *queue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// poll appends up to n queued events to buf. It returns the reader's
// error only when nothing is queued any more.
func (q *queue) poll(buf []cdc.Event, n int) ([]cdc.Event, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	queued := q.events[q.head:]
	k := min(n, len(queued))
	if k > 0 {
		var freed int64
		for i := range k {
			freed += int64(queued[i].Size)
		}
		buf = append(buf, queued[:k]...)
		clear(queued[:k]) // the events' bytes belong to buf now
		q.head += k
		if q.head == len(q.events) {
			q.events, q.head = q.events[:0], 0
			if cap(q.events) > maxIdleQueue {
				q.events = nil // an idle source does not keep a catch-up's array
			}
		}
		q.bytes -= freed
		if q.bytes <= q.max/2 {
			q.calmed = false
		}
		close(q.space)
		q.space = make(chan struct{})
	}
	if q.head < len(q.events) {
		q.wake() // more is ready
		return buf, nil
	}
	return buf, q.err
}

// usage returns the bytes queued now and the most ever queued.
func (q *queue) usage() (int64, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes, q.peak
}
