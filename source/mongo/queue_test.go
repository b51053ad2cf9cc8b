package mongo

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// The queue blocks its writer at the byte budget, never its reader, and
// hands out the final error only after every queued event.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1000)
		ev := func(op cdc.Op, size int) cdc.Event { return cdc.Event{Op: op, Size: size} }
		pushed := make(chan error, 1)
		if err := q.push(t.Context(), ev(cdc.OpInsert, 600)); err != nil {
			t.Fatal(err)
		}
		go func() { pushed <- q.push(t.Context(), ev(cdc.OpUpdate, 600)) }()
		synctest.Wait()
		select {
		case err := <-pushed:
			t.Fatalf("push over the budget returned %v, want it to wait", err)
		default:
		}
		if used, _ := q.usage(); used != 600 {
			t.Fatalf("queued %d bytes, want 600", used)
		}
		got, err := q.poll(nil, 10)
		if err != nil || len(got) != 1 || got[0].Op != cdc.OpInsert {
			t.Fatalf("poll = %v, %v; want the insert", ops(got), err)
		}
		synctest.Wait()
		if err := <-pushed; err != nil {
			t.Fatalf("push after room was made: %v", err)
		}
		if err := q.push(t.Context(), ev(cdc.OpInsert, 1001)); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("push of an event over the whole budget = %v, want ErrEventTooLarge", err)
		}
		q.fail(cdc.ErrEnd)
		got, err = q.poll(nil, 10)
		if len(got) != 1 || got[0].Op != cdc.OpUpdate || !errors.Is(err, cdc.ErrEnd) {
			t.Fatalf("poll after fail = %v, %v; want the update with cdc.ErrEnd", ops(got), err)
		}
		if _, peak := q.usage(); peak > 1000 {
			t.Fatalf("peak %d over the budget", peak)
		}

		// A blocked push gives up when its context ends.
		q = newQueue(100)
		q.push(t.Context(), ev(cdc.OpInsert, 100))
		ctx, cancel := context.WithCancel(t.Context())
		go func() { pushed <- q.push(ctx, ev(cdc.OpInsert, 50)) }()
		synctest.Wait()
		cancel()
		if err := <-pushed; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled push = %v, want context.Canceled", err)
		}
	})
}

// A queue kept full by its reader, as during a catch-up, hands events
// out in order and reuses its array: once grown to a few times what the
// budget holds, it is never reallocated.
func TestQueueFullReusesArray(t *testing.T) {
	const budget = 1000 // events of 1 byte
	q := newQueue(budget)
	pushed, polled, grown := 0, 0, 0
	var buf []cdc.Event
	for round := range 400 {
		for q.bytes < budget {
			if err := q.push(t.Context(), cdc.Event{Size: 1, WallTimeMS: int64(pushed)}); err != nil {
				t.Fatal(err)
			}
			pushed++
		}
		var err error
		if buf, err = q.poll(buf[:0], 1+round%300); err != nil {
			t.Fatal(err)
		}
		for _, ev := range buf {
			if ev.WallTimeMS != int64(polled) {
				t.Fatalf("round %d: polled event %d, want %d", round, ev.WallTimeMS, polled)
			}
			polled++
		}
		switch c := cap(q.events); {
		case c > 4*budget:
			t.Fatalf("round %d: array of %d events for %d queued", round, c, len(q.events)-q.head)
		case round == 200: // append's growth steps depend on cdc.Event's size: settled by now
			grown = c
		case round > 200 && c != grown:
			t.Fatalf("round %d: array reallocated from %d to %d events", round, grown, c)
		}
	}
	if buf, _ = q.poll(buf[:0], budget); len(buf) != pushed-polled || buf[len(buf)-1].WallTimeMS != int64(pushed-1) {
		t.Fatalf("drained %d events ending at %d, want %d ending at %d", len(buf), buf[len(buf)-1].WallTimeMS, pushed-polled, pushed-1)
	}
}

// BenchmarkQueueFull is the queue of a reader far ahead of its pipeline:
// full, polled 1000 events at a time, refilled at once. Each op is one
// event through it.
func BenchmarkQueueFull(b *testing.B) {
	const budget = 100_000
	q := newQueue(budget)
	buf := make([]cdc.Event, 0, 1000)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; {
		for q.bytes < budget {
			q.push(ctx, cdc.Event{Size: 1})
			i++
		}
		buf, _ = q.poll(buf[:0], 1000)
	}
}

// Change events map to cdc.Event fields as sub-slices of one copy, and
// malformed ones are refused with a reason.
func TestChangeEventRefusesMalformed(t *testing.T) {
	mustMarshal := func(d bson.D) []byte {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A resume token whose own last byte is not the document's NUL: the
	// outer lengths agree, the nested document does not end.
	badToken := mustMarshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "insert"}})
	token := 4 + 1 + len("_id\x00") // where the _id document starts
	badToken[token+int(badToken[token])-1] = 'x'
	tests := map[string][]byte{
		"nested document": badToken,
		"empty":           {},
		"truncated":       {20, 0, 0, 0, 2, 'a', 0},
		"no _id":          mustMarshal(bson.D{{Key: "operationType", Value: "insert"}}),
		"_id not a token": mustMarshal(bson.D{{Key: "_id", Value: 5}, {Key: "operationType", Value: "insert"}}),
		"no operation":    mustMarshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}}),
		"operation type":  mustMarshal(bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: 1}}),
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := changeEvent(raw, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func FuzzChangeEvent(f *testing.F) {
	seed, _ := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.D{{Key: "_data", Value: "8267C867A2000000192B042C0100296E5A1004"}}},
		{Key: "operationType", Value: "insert"}, {Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 2}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "to", Value: bson.D{{Key: "db", Value: "d"}}},
	})
	f.Add(seed)
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := changeEvent(raw, nil)
		if err != nil {
			return
		}
		if ev.Op == "" || ev.ResumeToken == nil {
			t.Fatalf("accepted an event without op or token: %+v", ev)
		}
		for _, b := range [][]byte{ev.ResumeToken, ev.DocumentKey, ev.FullDocument, ev.Extra} {
			if b != nil {
				if err := bson.Raw(b).Validate(); err != nil {
					t.Fatalf("field is not a valid document: %v", err)
				}
			}
		}
	})
}

func FuzzParsePosition(f *testing.F) {
	f.Add(`{"resume_token":{"_data":"8267C867A3000000012B0429296E1404"}}`)
	f.Add(`{"start_after_token":{"_data":"82"}}`)
	f.Add(`{"snapshot":{"start_token":{"_data":"82"},"last_id":{"$oid":"67c867a2fb1cbcd579f4e4de"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		pos, err := parsePosition(cdc.Position(s))
		if err != nil {
			return
		}
		// A valid token position survives a round trip unchanged.
		if pos.ResumeToken != nil {
			tok, err := parseToken("resume_token", pos.ResumeToken)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parsePosition(resumePos(tok)); err != nil {
				t.Fatalf("round trip of %s: %v", s, err)
			}
		}
	})
}

// A push that waits stallAfter for room reports the stall once, and again
// only after the queue was half emptied; a push that gets room sooner
// reports nothing.
func TestQueueStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1000)
		var stalls atomic.Int32
		q.stalled = func() { stalls.Add(1) }
		ev := cdc.Event{Op: cdc.OpInsert, Size: 100}
		for range 10 {
			if err := q.push(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
		pushed := make(chan error, 1)
		waitFor := func(d time.Duration, want int32, what string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if n := stalls.Load(); n != want {
				t.Fatalf("%s: %d stalls, want %d", what, n, want)
			}
		}
		go func() { pushed <- q.push(t.Context(), ev) }()
		waitFor(stallAfter/2, 0, "waiting half of stallAfter")
		waitFor(stallAfter, 1, "waiting longer than stallAfter")
		waitFor(10*stallAfter, 1, "one push waiting on")
		// Room for the waiting push, the queue not half emptied: a new
		// stall is not reported.
		q.poll(nil, 1)
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		go func() { pushed <- q.push(t.Context(), ev) }()
		waitFor(2*stallAfter, 1, "a stall before the queue was half emptied")
		q.poll(nil, 6) // half emptied
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
		for range 5 { // full again
			q.push(t.Context(), ev)
		}
		go func() { pushed <- q.push(t.Context(), ev) }()
		waitFor(2*stallAfter, 2, "a stall after the queue was half emptied")
		q.poll(nil, 10)
		if err := <-pushed; err != nil {
			t.Fatal(err)
		}
	})
}
