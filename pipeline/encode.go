package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// EncodeFunc appends the encoded form of ev to dst (no trailing newline). It
// must be safe for concurrent use.
type EncodeFunc func(dst []byte, ev *cdc.Event) ([]byte, error)

// chunk is a run of consecutive events that the encode pool encodes as one
// unit of work. Positions ride with their chunk: the consumer of
// encodeOrdered learns a chunk's positions only when it receives the chunk,
// in input order, after every earlier chunk.
//
// A chunk's buffers are reused when the chunk is: Records[i].Data points
// into Buf, so a record's data is valid until the chunk is encoded again.
type chunk struct {
	Events  []cdc.Event  // input, in source order
	Records []cdc.Record // output: one record per non-marker event, in order
	Buf     []byte       // backing store of every Records[i].Data

	ends []int         // end offsets in Buf of each record, reused
	err  error         // set by the worker that encoded the chunk
	done chan struct{} // one slot; the worker's "finished" signal

	onError   OnError          // what a failed event becomes
	cloneOrig bool             // a dead letter needs a copy of the event made before the transform
	dead      []cdc.DeadLetter // output: the events that failed, when onError is not OnErrorFail

	// Fields the pipeline uses to carry batch boundaries through the pool.
	off     int       // index of Events[0] in its batch, and of its room in the batch's records
	batch   *batchBuf // set on the last chunk of a batch
	last    bool      // the chunk closes its batch
	barrier *pause    // a pause barrier: reached once everything before it committed

	timed            bool      // with a tracer: the worker notes encStart and encEnd
	encStart, encEnd time.Time // when the worker encoded the chunk
}

// lastPos returns the position of the chunk's last event, markers included, or
// nil for a chunk without events.
func (c *chunk) lastPos() cdc.Position {
	if len(c.Events) == 0 {
		return nil
	}
	return c.Events[len(c.Events)-1].Pos
}

// encode encodes c.Events into c.Records with enc, reusing c's buffers.
// Markers (cdc.OpMarker) produce no record, nor does an event enc writes
// nothing for (the Debezium envelope has no value for a drop): its
// position still advances the checkpoint. The error names the position of
// the event that failed.
func (c *chunk) encode(enc EncodeFunc) error {
	c.Records = c.Records[:0]
	c.Buf = c.Buf[:0]
	c.ends = c.ends[:0]
	c.dead = c.dead[:0]
	for i := range c.Events {
		ev := &c.Events[i]
		if ev.Op == cdc.OpMarker {
			continue
		}
		var orig cdc.Event
		switch {
		case c.onError == OnErrorDeadLetter && c.cloneOrig:
			orig = cloneEvent(ev) // a transform may write over the event's bytes
		case c.onError != OnErrorFail:
			orig = *ev
		}
		var err error
		from := len(c.Buf)
		if ev.DecodeErr != nil {
			err = &stageError{"decode", ev.DecodeErr}
		} else {
			c.Buf, err = enc(c.Buf, ev)
		}
		if err != nil {
			if c.onError == OnErrorFail {
				return fmt.Errorf("%s %s event at position %s: %w", errorStage(err), ev.Op, ev.Pos, err)
			}
			c.Buf = c.Buf[:from]
			*ev = orig
			c.dead = append(c.dead, cdc.DeadLetter{Event: orig, Stage: errorStage(err), Err: err.Error(), Time: time.Now()})
			continue
		}
		if len(c.Buf) == from {
			continue
		}
		c.ends = append(c.ends, len(c.Buf))
		c.Records = append(c.Records, cdc.Record{Event: *ev})
	}
	// Buf may have moved while it grew, so the records are pointed into it
	// only now. The capacity limit keeps a sink that appends to Data from
	// writing over the next record.
	start := 0
	for i, end := range c.ends {
		c.Records[i].Data = c.Buf[start:end:end]
		start = end
	}
	return nil
}

// encodeOrdered encodes the chunks it receives from in on workers goroutines
// (workers <= 0 means 1) and sends them to out in the order it received
// them. It closes out when it returns, and no goroutine it started outlives
// it. It returns:
//   - nil once in is closed and every chunk was sent;
//   - the error of the first failed chunk by input position (never a
//     cancellation caused by that failure); no chunk after it is sent;
//   - ctx.Err() when ctx is done first.
//
// About 2×workers chunks are in the pool at once; the caller bounds the rest
// by what it sends. Once encodeOrdered returns nothing receives from in, so
// a sender must also watch ctx or a signal of its own. A chunk received from
// out belongs to the receiver; a chunk that was never sent back must not be
// given to another call while this one runs.
func encodeOrdered(ctx context.Context, workers int, enc EncodeFunc, in <-chan *chunk, out chan<- *chunk) error {
	defer close(out)
	workers = max(workers, 1)

	// Deferred calls run in reverse: cancel, then wait for every goroutine
	// below, then close out.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// pending holds the chunks in input order; reading it in turn and
	// waiting for each chunk's done signal restores the order, and its
	// capacity bounds the work in flight. work feeds the workers.
	window := 2 * workers
	pending := make(chan *chunk, window)
	work := make(chan *chunk, window)

	var inClosed bool // set by dispatch before it closes pending
	for range workers {
		wg.Go(func() {
			for c := range work {
				// A chunk is always encoded to its end, even after a
				// cancel: its result is then never read, and a worker that
				// stopped early would turn an earlier chunk's real error
				// into a cancellation.
				if c.timed {
					c.encStart = time.Now()
					c.err = c.encode(enc)
					c.encEnd = time.Now()
				} else {
					c.err = c.encode(enc)
				}
				c.done <- struct{}{} // never blocks: one slot, emptied at dispatch
			}
		})
	}
	wg.Go(func() { // dispatch
		defer close(work)
		defer close(pending)
		for {
			var c *chunk
			select {
			case got, ok := <-in:
				if !ok {
					inClosed = true
					return
				}
				c = got
			case <-ctx.Done():
				return
			}
			if c.done == nil {
				c.done = make(chan struct{}, 1)
			}
			select { // a reused chunk may hold a stale signal
			case <-c.done:
			default:
			}
			c.err = nil
			select {
			case pending <- c:
			case <-ctx.Done():
				return
			}
			select {
			case work <- c:
			case <-ctx.Done():
				return
			}
		}
	})

	// Emit, in order. The emitter alone decides which error wins: the
	// first chunk in input order that failed.
	for c := range pending {
		select {
		case <-c.done:
		default:
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if c.err != nil {
			return c.err
		}
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// pending closes when in closes or ctx is done; tell them apart.
	if inClosed {
		return nil
	}
	return ctx.Err()
}

// stageError marks an error of a stage before the encoder: the
// transform, or the source's decoding.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// transformThen runs tr before enc. A change tr drops writes nothing,
// which the chunk takes for "no record": its position still advances the
// checkpoint.
func transformThen(tr Transformer, enc EncodeFunc) EncodeFunc {
	return func(dst []byte, ev *cdc.Event) ([]byte, error) {
		keep, err := tr.Apply(ev)
		if err != nil {
			return dst, &stageError{"transform", err}
		}
		if !keep {
			return dst, nil
		}
		return enc(dst, ev)
	}
}

// errorStage names the stage an encode-stage error came from.
func errorStage(err error) string {
	var se *stageError
	if errors.As(err, &se) {
		return se.stage
	}
	return "encode"
}

// cloneEvent returns a copy of ev that shares no memory with it.
func cloneEvent(ev *cdc.Event) cdc.Event {
	c := *ev
	c.Pos = bytes.Clone(c.Pos)
	for _, b := range []*[]byte{&c.DocumentKey, &c.FullDocument, &c.PreImage, &c.UpdateDesc, &c.ResumeToken, &c.Extra, &c.Payload} {
		*b = bytes.Clone(*b)
	}
	return c
}
