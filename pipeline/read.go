package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// chunk sizes: a poll is cut into about one chunk per worker, within these
// bounds, so that a batch encodes in parallel and a chunk is worth its
// channel hand-offs.
const (
	minChunkEvents = 16
	maxChunkEvents = 256
)

// reader polls the source and cuts what it reads into batches, and batches
// into chunks for the encode pool. It is the only sender on out, so it
// closes out; the pool and the committer finish what they hold when their
// input closes. That is how a drain flows down the pipeline.
type reader struct {
	p   *Pipeline
	out chan<- *chunk

	cur   *batchBuf // the open batch; nil when none
	bytes int       // the open batch's bytes (cdc.Event.MemSize)
	first time.Time // when the open batch got its first event
	tail  *chunk    // the open batch's newest chunk, not yet sent

	spare       *batchBuf   // a free batch buffer taken early: the committer is idle
	timer       *time.Timer // bounds a group-commit wait
	lingerUntil time.Time   // when the open batch, caught up with the committer idle, closes; zero before
	carry       []cdc.Event // polled events that did not fit the batch's byte budget
	ended       bool        // the source returned cdc.ErrEnd
	endErr      error       // the source's end, when it wraps cdc.ErrEnd with a reason; Run returns it
	avgSize     int         // running average event size, to size polls by bytes
	barrier     *pause      // the pause the last barrier was sent for
}

func (r *reader) run(ctx context.Context) error {
	defer close(r.out)
	p := r.p
	for {
		pr, draining, changed := p.control()
		if draining {
			// The final bounded batch: what was read goes out; nothing
			// more is polled.
			return r.closeBatch(ctx)
		}
		if pr != nil {
			if err := r.closeBatch(ctx); err != nil {
				return err
			}
			if pr != r.barrier {
				// Everything sent before the barrier commits before the
				// committer reaches it; that is when Pause returns.
				r.barrier = pr
				if err := r.send(ctx, &chunk{barrier: pr}); err != nil {
					return err
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if r.ended && len(r.carry) == 0 {
			return r.closeBatch(ctx)
		}
		if r.cur == nil {
			if r.spare != nil {
				r.cur, r.spare = r.spare, nil
				r.bytes = 0
			} else {
				select { // at most batchesInFlight batches: this bounds memory
				case b := <-p.free:
					r.cur = b
					r.bytes = 0
				case <-changed:
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if p.cfg.Transform != nil && len(r.cur.events) == 0 && cap(r.cur.events) < p.cfg.MaxRecords {
			// A transform writes the events of the chunks already sent
			// while the batch fills: the batch's events must not move
			// (an append that grew the slice would copy them as they
			// are written). A batch holds at most MaxRecords.
			r.cur.events = make([]cdc.Event, 0, p.cfg.MaxRecords)
		}

		before := len(r.cur.events)
		room := r.room()
		caughtUp := false
		if len(r.carry) > 0 {
			k := min(room, len(r.carry))
			r.cur.events = append(r.cur.events, r.carry[:k]...)
			p.notePolled(r.cur, r.cur.events[before:])
			clear(r.carry[:k])
			r.carry = r.carry[k:]
			caughtUp = r.ended && len(r.carry) == 0
		} else {
			evs, err := p.src.Poll(ctx, r.cur.events, room)
			end := errors.Is(err, cdc.ErrEnd)
			if err != nil && !end {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				p.obs.Failed("poll", err)
				return fmt.Errorf("poll source: %w", err)
			}
			r.cur.events = evs
			r.ended = end
			if end && err != cdc.ErrEnd {
				r.endErr = err // not a plain end: reported once everything is committed
			}
			added := len(evs) - before
			r.polled(evs[before:])
			if added > 0 || before == 0 && !end {
				p.notePolled(r.cur, evs[before:])
			}
			if added == 0 && !end {
				if before > 0 {
					if err := r.caughtUp(ctx, changed); err != nil {
						return err
					}
					continue
				}
				// Idle: sleep until the source signals, or we are told
				// to pause, drain or stop. Never a spin, never a timer.
				select {
				case <-p.src.Ready():
				case <-changed:
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
			caughtUp = added < room
		}

		full, err := r.accept(ctx, before)
		if err != nil {
			return err
		}
		switch {
		case full || r.ended && len(r.carry) == 0 || time.Since(r.first) >= p.cfg.CommitInterval:
			err = r.closeBatch(ctx)
		case caughtUp:
			err = r.caughtUp(ctx, changed)
		default:
			err = r.sendTail(ctx)
		}
		if err != nil {
			return err
		}
	}
}

// caughtUp handles the open batch, not empty, when the source has handed
// out all it has for now. If the committer is idle, the batch closes once
// the source has added nothing for as long as the last commit took (see
// maxLinger), at once for a sink that commits in microseconds. While the
// committer still writes
// an earlier batch, this one could not be written before that ends
// anyway, so it stays open and takes what the source delivers meanwhile:
// a group commit, one put and one commit (fsync) for what would have been
// several small batches. It then closes when the committer is done or the
// commit interval has passed since its first event, and returns without
// closing it when the source signals more (to poll again), or when a
// pause or drain was requested (the reader's loop handles those).
func (r *reader) caughtUp(ctx context.Context, changed <-chan struct{}) error {
	p := r.p
	if r.spare == nil {
		select {
		case b := <-p.free:
			r.spare = b
		default:
		}
	}
	wait := time.Until(r.first.Add(p.cfg.CommitInterval))
	var idle <-chan *batchBuf = p.free
	if r.spare != nil {
		// The committer is idle. A source still delivering (a JetStream
		// pull answered in parts, a publisher a little slower than us)
		// gets as long as a commit takes, at most maxLinger, counted from
		// when the batch first caught up, to add to it before it closes:
		// at worst the latency of one more commit, for fewer, larger
		// commits (fsyncs) while it streams.
		if r.lingerUntil.IsZero() {
			r.lingerUntil = time.Now().Add(min(time.Duration(p.commitTook.Load()), maxLinger))
		}
		wait = min(wait, time.Until(r.lingerUntil))
		idle = nil
	}
	if wait <= minLinger {
		return r.closeBatch(ctx)
	}
	if err := r.sendTail(ctx); err != nil { // encoded while we wait
		return err
	}
	if r.timer == nil {
		r.timer = time.NewTimer(wait)
	} else {
		r.timer.Reset(wait)
	}
	defer r.timer.Stop()
	select {
	case b := <-idle:
		r.spare = b
		return r.closeBatch(ctx)
	case <-r.timer.C:
		return r.closeBatch(ctx)
	case <-p.src.Ready():
		return nil
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A caught-up batch lingers for at most maxLinger with the committer idle,
// and not at all when commits take under minLinger (a sink without fsync).
const (
	maxLinger = 5 * time.Millisecond
	minLinger = 50 * time.Microsecond
)

// room returns how many events to ask the source for: what is left of
// MaxRecords, and of MaxBytes at the average event size seen so far.
func (r *reader) room() int {
	cfg := r.p.cfg
	room := cfg.MaxRecords - len(r.cur.events)
	if r.avgSize > 0 {
		room = min(room, (cfg.MaxBytes-r.bytes)/r.avgSize+1)
	}
	return max(room, 1)
}

// polled accounts for events handed out by the source.
func (r *reader) polled(evs []cdc.Event) {
	if len(evs) == 0 {
		return
	}
	var bytes int
	for i := range evs {
		bytes += evs[i].MemSize()
	}
	if r.avgSize == 0 {
		r.avgSize = bytes / len(evs)
	} else {
		r.avgSize = (3*r.avgSize + bytes/len(evs)) / 4
	}
	r.avgSize = max(r.avgSize, 1)
	r.p.statsMu.Lock()
	r.p.stats.EventsIn += int64(len(evs))
	r.p.statsMu.Unlock()
	r.p.obs.Polled(len(evs), bytes)
}

// accept admits the events appended to the open batch from index from: an
// event that would take a non-empty batch past MaxBytes, and every event
// after it, move to carry for the next batch. It cuts the admitted events
// into chunks, sends all but the newest, and keeps that one as the tail. It
// reports whether the batch is full.
func (r *reader) accept(ctx context.Context, from int) (full bool, err error) {
	cfg := r.p.cfg
	evs := r.cur.events
	if from == 0 {
		r.first = time.Now()
	}
	end := len(evs)
	for i := from; i < len(evs); i++ {
		size := evs[i].MemSize()
		if i > 0 && r.bytes+size > cfg.MaxBytes {
			end = i
			full = true
			break
		}
		r.bytes += size
	}
	if end < len(evs) {
		// In front of what is left of carry: these events came first.
		r.carry = slices.Insert(r.carry, 0, evs[end:]...)
		clear(evs[end:])
		r.cur.events = evs[:end]
	}
	if len(r.cur.events) >= cfg.MaxRecords || r.bytes >= cfg.MaxBytes {
		full = true
	}

	n := end - from
	size := min(max((n+cfg.Workers-1)/cfg.Workers, minChunkEvents), maxChunkEvents)
	for a := from; a < end; a += size {
		if err := r.sendTail(ctx); err != nil {
			return false, err
		}
		b := min(a+size, end)
		c := r.p.getChunk()
		c.timed = r.p.cfg.Tracer != nil
		c.Events = evs[a:b:b]
		c.off = a
		c.Records = r.cur.recordsFor(a, b)
		r.tail = c
	}
	return full, nil
}

// closeBatch sends the open batch's last chunk, marked as such, and leaves
// no batch open. A batch without events stays open: it is never sent.
func (r *reader) closeBatch(ctx context.Context) error {
	if r.cur == nil || len(r.cur.events) == 0 {
		return nil
	}
	c := r.tail
	r.tail = nil
	if c == nil {
		c = r.p.getChunk()
		c.timed = r.p.cfg.Tracer != nil
	}
	c.last = true
	c.batch = r.cur
	if r.p.cfg.Tracer != nil {
		if r.cur.trace == nil {
			r.cur.trace = &batchTrace{}
		}
		*r.cur.trace = batchTrace{readStart: r.first, readEnd: time.Now()}
	}
	r.cur = nil
	r.lingerUntil = time.Time{}
	r.p.closed.Add(1)
	return r.send(ctx, c)
}

func (r *reader) sendTail(ctx context.Context) error {
	if r.tail == nil {
		return nil
	}
	c := r.tail
	r.tail = nil
	return r.send(ctx, c)
}

func (r *reader) send(ctx context.Context, c *chunk) error {
	select {
	case r.out <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
