package mongowire

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// recordingSource is a cursorSource that hands out numbered documents
// forever and records what each Next asked for.
type recordingSource struct {
	mu     sync.Mutex
	calls  []sourceCall
	closed bool
}

type sourceCall struct {
	n       int
	maxWait time.Duration
}

func (r *recordingSource) Next(_ context.Context, n, _ int, maxWait time.Duration) ([]bson.Raw, bson.D, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, sourceCall{n, maxWait})
	doc, _ := bson.Marshal(bson.D{{Key: "call", Value: len(r.calls)}})
	return []bson.Raw{doc}, bson.D{{Key: "postBatchResumeToken", Value: bson.D{{Key: "_data", Value: "00"}}}}, false, nil
}

func (r *recordingSource) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

func (r *recordingSource) last() (sourceCall, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return sourceCall{}, r.closed
	}
	return r.calls[len(r.calls)-1], r.closed
}

func getMore(id int64, extra ...bson.E) bson.D {
	return append(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "$db", Value: "d"}}, extra...)
}

func TestCursorIdleTimeout(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	s := startServer(t, func(c *Config) { c.CursorTimeout = 10 * time.Minute })
	s.now = clock.Now // before any cursor exists
	src := &recordingSource{}
	cur := &cursor{ns: "d.c", src: src}
	s.registerCursor(cur)
	nc := dial(t, s)

	clock.Advance(9 * time.Minute)
	if r := roundTrip(t, nc, getMore(cur.id)); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("getMore within the timeout: %v", r)
	}
	clock.Advance(9 * time.Minute) // idle time restarts at each getMore
	if r := roundTrip(t, nc, getMore(cur.id)); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("getMore 9 minutes after the last one: %v", r)
	}
	clock.Advance(10*time.Minute + time.Second)
	wantError(t, roundTrip(t, nc, getMore(cur.id)), mongoerr.CursorNotFound, "not found")
	if _, closed := src.last(); !closed {
		t.Error("timed-out cursor's source was not closed")
	}
}

func TestGetMoreAwaitData(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	tailing := &recordingSource{}
	tc := &cursor{ns: "d.c", src: tailing, tailable: true, awaitData: true}
	s.registerCursor(tc)
	plain := &recordingSource{}
	pc := &cursor{ns: "d.c", src: plain}
	s.registerCursor(pc)

	r := roundTrip(t, nc, getMore(tc.id, bson.E{Key: "maxTimeMS", Value: int64(250)}, bson.E{Key: "batchSize", Value: 7}))
	if call, _ := tailing.last(); call.maxWait != 250*time.Millisecond || call.n != 7 {
		t.Fatalf("Next got %+v, want maxWait 250ms and n 7", call)
	}
	if r.Lookup("cursor", "postBatchResumeToken", "_data").StringValue() != "00" || r.Lookup("cursor", "id").Int64() != tc.id {
		t.Fatalf("getMore reply %v lacks the source's extras or the cursor id", r)
	}
	if k := r.Lookup("cursor").Document().Index(1).Key(); k != "postBatchResumeToken" {
		t.Errorf("second cursor field is %s, want the extras right after nextBatch", k)
	}
	roundTrip(t, nc, getMore(tc.id))
	if call, _ := tailing.last(); call.maxWait != time.Second {
		t.Fatalf("default await = %v, want 1s", call.maxWait)
	}
	wantError(t, roundTrip(t, nc, getMore(pc.id, bson.E{Key: "maxTimeMS", Value: 100})), mongoerr.BadValue, "non-awaitData cursor")
	// The refused getMore left the cursor usable.
	if r := roundTrip(t, nc, getMore(pc.id)); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("getMore after a refused one: %v", r)
	}
	r = roundTrip(t, nc, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{pc.id, int64(42)}}, {Key: "$db", Value: "d"}})
	if r.Lookup("cursorsKilled", "0").Int64() != pc.id || r.Lookup("cursorsNotFound", "0").Int64() != 42 {
		t.Fatalf("killCursors reply %v", r)
	}
	if _, closed := plain.last(); !closed {
		t.Error("killed cursor's source was not closed")
	}
}

func TestSliceSourceBatches(t *testing.T) {
	doc := func(n int) bson.Raw {
		b, _ := bson.Marshal(bson.D{{Key: "pad", Value: string(make([]byte, n))}})
		return b
	}
	tests := map[string]struct {
		sizes    []int
		n, bytes int
		want     int
		done     bool
	}{
		"count bound":                {sizes: []int{10, 10, 10}, n: 2, bytes: 1 << 20, want: 2},
		"byte bound":                 {sizes: []int{100, 100, 100}, n: 10, bytes: 250, want: 2},
		"first document always fits": {sizes: []int{1000, 10}, n: 10, bytes: 10, want: 1},
		"everything":                 {sizes: []int{1, 2}, n: 10, bytes: 1 << 20, want: 2, done: true},
		"batch size zero":            {sizes: []int{1}, n: 0, bytes: 1 << 20, want: 0},
		"empty result is exhausted":  {sizes: nil, n: 101, bytes: 1 << 20, want: 0, done: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &sliceSource{}
			for _, n := range tc.sizes {
				src.docs = append(src.docs, doc(n))
			}
			got, _, done, err := src.Next(context.Background(), tc.n, tc.bytes, 0)
			if err != nil || len(got) != tc.want || done != tc.done {
				t.Fatalf("Next = %d docs, done %v, err %v; want %d, %v", len(got), done, err, tc.want, tc.done)
			}
		})
	}
}

// labellingSource labels the getMore errors of its cursor, as change
// streams do.
type labellingSource struct{ recordingSource }

func (*labellingSource) LabelError(err error) error {
	if e, ok := mongoerr.As(err); ok {
		e.Labels = append(e.Labels, "TestLabel")
	}
	return err
}

func TestFailGetMoreAfterCursorCheckout(t *testing.T) {
	s := startServer(t, func(c *Config) { c.EnableTestCommands = true })
	nc := dial(t, s)
	configure := func(data bson.D) {
		t.Helper()
		r := roundTrip(t, nc, bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}, {Key: "data", Value: data}, {Key: "$db", Value: "admin"}})
		if r.Lookup("ok").AsFloat64() != 1 {
			t.Fatalf("configureFailPoint: %v", r)
		}
	}
	src := &labellingSource{}
	cur := &cursor{ns: "d.c", src: src, tailable: true, awaitData: true}
	s.registerCursor(cur)
	configure(bson.D{{Key: "errorCode", Value: 91}})
	r := roundTrip(t, nc, getMore(cur.id))
	wantError(t, r, 91, "failGetMoreAfterCursorCheckout")
	if r.Lookup("errorLabels", "0").StringValue() != "TestLabel" {
		t.Errorf("error not labelled by the cursor's source: %v", r)
	}
	if _, closed := src.last(); !closed {
		t.Error("the failed cursor was not closed")
	}
	wantError(t, roundTrip(t, nc, getMore(cur.id)), mongoerr.CursorNotFound, "not found")

	cur2 := &cursor{ns: "d.c", src: &recordingSource{}}
	s.registerCursor(cur2)
	configure(bson.D{{Key: "closeConnection", Value: true}})
	nc.Write(opMsg(1, 0, marshal(t, getMore(cur2.id))))
	expectClosed(t, nc)
}
