package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/cdc"
)

// slowEncode encodes like testEncode after sleeping for the event's
// WallTimeMS in (virtual) microseconds, and tracks how many encodes run at
// once.
type slowEncode struct {
	active, peak atomic.Int32
}

func (s *slowEncode) encode(dst []byte, ev *cdc.Event) ([]byte, error) {
	n := s.active.Add(1)
	defer s.active.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(time.Duration(ev.WallTimeMS) * time.Microsecond)
	return testEncode(dst, ev)
}

// chunkPlan describes one input chunk: its events' delays, and which event
// fails (-1 for none).
type chunkPlan struct {
	delays []int64
	bad    int
}

// makeChunks builds chunks from plans, numbering positions across chunks.
func makeChunks(plans []chunkPlan) []*chunk {
	var chunks []*chunk
	n := 0
	for _, pl := range plans {
		c := &chunk{}
		for j, d := range pl.delays {
			ev := cdc.Event{Pos: pos(n), Op: cdc.OpInsert, WallTimeMS: d, Payload: fmt.Appendf(nil, "ev%d", n)}
			if j == pl.bad {
				ev.Payload = []byte("bad")
			}
			if d < 0 { // a negative delay stands for a marker
				ev.Op, ev.WallTimeMS = cdc.OpMarker, 0
			}
			c.Events = append(c.Events, ev)
			n++
		}
		chunks = append(chunks, c)
	}
	return chunks
}

// feed sends chunks on a new channel and closes it, or stops when stop is
// closed.
func feed(chunks []*chunk, stop <-chan struct{}) <-chan *chunk {
	in := make(chan *chunk)
	go func() {
		defer close(in)
		for _, c := range chunks {
			select {
			case in <- c:
			case <-stop:
				return
			}
		}
	}()
	return in
}

// checkChunk reports what is wrong with an encoded chunk: its records must
// be its non-marker events, in order, with their data, and its position
// its last event's.
func checkChunk(c *chunk) error {
	var recs int
	for _, ev := range c.Events {
		if ev.Op == cdc.OpMarker {
			continue
		}
		if recs >= len(c.Records) {
			return fmt.Errorf("chunk ending at %s: %d records, want more", c.lastPos(), len(c.Records))
		}
		r := c.Records[recs]
		if string(r.Pos) != string(ev.Pos) || string(r.Data) != string(ev.Payload) {
			return fmt.Errorf("record %d = {%s %q}, want {%s %q}", recs, r.Pos, r.Data, ev.Pos, ev.Payload)
		}
		recs++
	}
	if recs != len(c.Records) {
		return fmt.Errorf("chunk ending at %s: %d records, want %d", c.lastPos(), len(c.Records), recs)
	}
	if len(c.Events) > 0 && string(c.lastPos()) != string(c.Events[len(c.Events)-1].Pos) {
		return fmt.Errorf("chunk position %s, want %s", c.lastPos(), c.Events[len(c.Events)-1].Pos)
	}
	return nil
}

func TestEncodeOrderedKeepsInputOrder(t *testing.T) {
	tests := map[string]struct {
		workers  int
		wantPeak int32
	}{
		"negative workers clamp to 1": {workers: -3, wantPeak: 1},
		"zero workers clamp to 1":     {workers: 0, wantPeak: 1},
		"one worker":                  {workers: 1, wantPeak: 1},
		"three workers":               {workers: 3, wantPeak: 3},
		"eight workers":               {workers: 8, wantPeak: 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Earlier chunks are slower, so a pool that emitted in
				// completion order would reverse them.
				var plans []chunkPlan
				for i := range 40 {
					plans = append(plans, chunkPlan{delays: []int64{int64(100 * (40 - i)), int64(i % 3), -1}, bad: -1})
				}
				chunks := makeChunks(plans)
				stop := make(chan struct{})
				defer close(stop)
				out := make(chan *chunk)
				var enc slowEncode
				errc := make(chan error, 1)
				go func() { errc <- encodeOrdered(t.Context(), tc.workers, enc.encode, feed(chunks, stop), out) }()

				var got []*chunk
				for c := range out {
					if err := checkChunk(c); err != nil {
						t.Error(err)
					}
					got = append(got, c)
				}
				if err := <-errc; err != nil {
					t.Fatalf("encodeOrdered = %v", err)
				}
				if !slices.Equal(got, chunks) {
					t.Fatalf("got %d chunks, not the %d input chunks in order", len(got), len(chunks))
				}
				if p := enc.peak.Load(); p != tc.wantPeak {
					t.Errorf("%d encodes ran at once, want %d", p, tc.wantPeak)
				}
			})
		})
	}
}

func TestEncodeOrderedReturnsFirstErrorByPosition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plans := []chunkPlan{
			{delays: []int64{1}, bad: -1},
			{delays: []int64{1}, bad: -1},
			{delays: []int64{5000, 5000}, bad: 1}, // fails last, at position 3
			{delays: []int64{1}, bad: -1},
			{delays: []int64{1}, bad: 0}, // fails first, at position 5
			{delays: []int64{1}, bad: -1},
		}
		chunks := makeChunks(plans)
		stop := make(chan struct{})
		defer close(stop)
		out := make(chan *chunk, len(chunks))
		var enc slowEncode
		err := encodeOrdered(t.Context(), 4, enc.encode, feed(chunks, stop), out)
		if !errors.Is(err, errBadEvent) || !strings.Contains(err.Error(), "position 3:") {
			t.Fatalf("encodeOrdered = %v, want the error at position 3", err)
		}
		var got []*chunk
		for c := range out {
			got = append(got, c)
		}
		if !slices.Equal(got, chunks[:2]) {
			t.Errorf("sent %d chunks, want the 2 before the failed one", len(got))
		}
	})
}

func TestEncodeOrderedFailedChunkBlocksLaterChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plans := []chunkPlan{{delays: []int64{10}, bad: -1}, {delays: []int64{3000}, bad: 0}}
		for range 10 {
			plans = append(plans, chunkPlan{delays: []int64{0}, bad: -1}) // done long before chunk 1
		}
		chunks := makeChunks(plans)
		stop := make(chan struct{})
		defer close(stop)
		out := make(chan *chunk, len(chunks))
		var enc slowEncode
		err := encodeOrdered(t.Context(), 3, enc.encode, feed(chunks, stop), out)
		if !errors.Is(err, errBadEvent) {
			t.Fatalf("encodeOrdered = %v, want the encode error", err)
		}
		var got []*chunk
		for c := range out {
			got = append(got, c)
		}
		if !slices.Equal(got, chunks[:1]) {
			t.Errorf("sent %d chunks, want only the one before the failed chunk", len(got))
		}
	})
}

func TestEncodeOrderedCancelMidFlight(t *testing.T) {
	tests := map[string]struct {
		readFirst int // chunks the consumer reads before cancelling; it reads no more
		outCap    int
	}{
		"consumer never reads":             {readFirst: 0, outCap: 0},
		"consumer stops after two":         {readFirst: 2, outCap: 0},
		"buffered output, stops after one": {readFirst: 1, outCap: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var plans []chunkPlan
				for range 30 {
					plans = append(plans, chunkPlan{delays: []int64{200, 200}, bad: -1})
				}
				chunks := makeChunks(plans)
				stop := make(chan struct{})
				defer close(stop)
				ctx, cancel := context.WithCancel(t.Context())
				out := make(chan *chunk, tc.outCap)
				var enc slowEncode
				errc := make(chan error, 1)
				go func() { errc <- encodeOrdered(ctx, 4, enc.encode, feed(chunks, stop), out) }()
				for range tc.readFirst {
					if c := <-out; checkChunk(c) != nil {
						t.Error(checkChunk(c))
					}
				}
				synctest.Wait() // workers busy, the pool full, the emitter blocked on out
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Fatalf("encodeOrdered = %v, want context.Canceled", err)
				}
				// out is closed; what it buffered is still in order.
				var got []*chunk
				for c := range out {
					got = append(got, c)
				}
				if !slices.Equal(got, chunks[tc.readFirst:tc.readFirst+len(got)]) {
					t.Error("buffered chunks out of order")
				}
				// synctest.Test fails if any goroutine of the pool is left.
			})
		})
	}
}

func TestEncodeOrderedEmptyInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := make(chan *chunk)
		close(in)
		out := make(chan *chunk)
		if err := encodeOrdered(t.Context(), 2, testEncode, in, out); err != nil {
			t.Fatalf("encodeOrdered = %v", err)
		}
		if _, ok := <-out; ok {
			t.Fatal("out not closed")
		}
	})
}

// TestEncodeOrderedProperties checks, over random chunk sizes, worker
// counts, worker delays, failures and cancellations, that the chunks sent
// are a prefix of the input in order, each with its own positions and
// records; that the error is the first failure by position, or a
// cancellation only if the test cancelled; and that nothing is left
// running (synctest.Test fails otherwise).
func TestEncodeOrderedProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nchunks := rapid.IntRange(0, 25).Draw(rt, "chunks")
		var plans []chunkPlan
		firstFail := -1
		for i := range nchunks {
			n := rapid.IntRange(0, 6).Draw(rt, fmt.Sprintf("chunk%d.events", i))
			delays := make([]int64, n)
			for j := range delays {
				delays[j] = rapid.Int64Range(-1, 300).Draw(rt, fmt.Sprintf("chunk%d.delay%d", i, j))
			}
			bad := -1
			if n > 0 && rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("chunk%d.fails", i)) == 0 {
				bad = rapid.IntRange(0, n-1).Draw(rt, fmt.Sprintf("chunk%d.bad", i))
				delays[bad] = max(delays[bad], 0) // a marker is never encoded, so it cannot fail
				if firstFail < 0 {
					firstFail = i
				}
			}
			plans = append(plans, chunkPlan{delays: delays, bad: bad})
		}
		workers := rapid.IntRange(-1, 6).Draw(rt, "workers")
		outCap := rapid.IntRange(0, 3).Draw(rt, "outCap")
		cancelAfter := rapid.IntRange(-1, nchunks).Draw(rt, "cancelAfter") // -1: never cancel
		chunks := makeChunks(plans)

		var (
			got     []*chunk
			err     error
			badData error
		)
		synctest.Test(t, func(t *testing.T) {
			stop := make(chan struct{})
			defer close(stop)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			out := make(chan *chunk, outCap)
			var enc slowEncode
			errc := make(chan error, 1)
			go func() { errc <- encodeOrdered(ctx, workers, enc.encode, feed(chunks, stop), out) }()
			if cancelAfter == 0 {
				cancel()
			}
			for c := range out {
				if e := checkChunk(c); e != nil && badData == nil {
					badData = e
				}
				got = append(got, c)
				if len(got) == cancelAfter {
					cancel()
				}
			}
			err = <-errc
		})

		if badData != nil {
			rt.Fatal(badData)
		}
		if len(got) > len(chunks) || !slices.Equal(got, chunks[:len(got)]) {
			rt.Fatalf("sent %d chunks that are not a prefix of the input in order", len(got))
		}
		if firstFail >= 0 && len(got) > firstFail {
			rt.Fatalf("sent %d chunks past the failed chunk %d", len(got), firstFail)
		}
		switch {
		case err == nil:
			if firstFail >= 0 || len(got) != len(chunks) {
				rt.Fatalf("nil error after sending %d of %d chunks (first failure %d)", len(got), len(chunks), firstFail)
			}
		case errors.Is(err, context.Canceled):
			if cancelAfter < 0 {
				rt.Fatalf("a bare cancellation nobody asked for: %v", err)
			}
		default:
			if firstFail < 0 || len(got) != firstFail {
				rt.Fatalf("error %v after %d chunks; first failure is chunk %d", err, len(got), firstFail)
			}
			c := chunks[firstFail]
			want := fmt.Sprintf("position %s:", c.Events[plans[firstFail].bad].Pos)
			if !errors.Is(err, errBadEvent) || !strings.Contains(err.Error(), want) {
				rt.Fatalf("error %v, want the failure at %s", err, want)
			}
		}
	})
}

// TestEncodeSkipsEmptyEncoding: an event the encoder writes nothing for
// (the Debezium envelope for a drop) has no record, the records around it
// keep their data, and the chunk's position is still its last event's.
func TestEncodeSkipsEmptyEncoding(t *testing.T) {
	enc := func(dst []byte, ev *cdc.Event) ([]byte, error) {
		if ev.Op == cdc.OpDrop {
			return dst, nil
		}
		return append(dst, ev.Payload...), nil
	}
	c := &chunk{Events: []cdc.Event{
		{Pos: pos(1), Op: cdc.OpInsert, Payload: []byte("a")},
		{Pos: pos(2), Op: cdc.OpDrop},
		{Pos: pos(3), Op: cdc.OpInsert, Payload: []byte("b")},
		{Pos: pos(4), Op: cdc.OpDrop},
	}}
	if err := c.encode(enc); err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 2 || string(c.Records[0].Data) != "a" || string(c.Records[1].Data) != "b" ||
		string(c.Records[1].Pos) != string(pos(3)) {
		t.Fatalf("records %+v, want a and b", c.Records)
	}
	if string(c.lastPos()) != string(pos(4)) {
		t.Errorf("chunk position %s, want %s", c.lastPos(), pos(4))
	}
}
