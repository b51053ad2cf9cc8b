package mongo

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/mongowire"
)

// An idle collection's position still advances, through markers, while
// the rest of the deployment writes (a real replica set also writes a
// no-op every 10 s; the embedded server does not).
func TestIdleMarkersAdvance(t *testing.T) {
	e := newEnv(t)
	src := openSource(t, e.config(t), nil)
	insert(t, e.coll, 1)
	other := e.client.Database("shop").Collection("other")
	var times []cdc.Timestamp
	n := 0
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		n++
		insert(t, other, n)
		times = times[:0]
		for _, ev := range evs {
			if ev.Op == cdc.OpMarker {
				ts, _ := positionTime(ev.Pos)
				times = append(times, ts)
			}
		}
		return len(times) >= 3 && times[len(times)-1].T > times[0].T
	})
	if err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-1]
	if last.Op != cdc.OpMarker {
		t.Fatalf("last event %s, want a marker", last.Op)
	}
	for i := 1; i < len(times); i++ {
		if times[i].T < times[i-1].T || times[i].T == times[i-1].T && times[i].I < times[i-1].I {
			t.Fatalf("marker times go back: %v", times)
		}
	}
	// The newest marker resumes, and nothing before it comes back.
	cp := cdc.Checkpoint{Source: last.Pos, Meta: src.Identity()}
	insert(t, e.coll, 2)
	again := openSource(t, e.config(t), &cp)
	evs, err := pollUntil(t, again, countOps(1))
	if err != nil {
		t.Fatal(err)
	}
	if ev := nonMarkers(evs)[0]; docID(t, ev) != 2 {
		t.Fatalf("resumed from an idle marker at %d, want insert 2", docID(t, ev))
	}
}

// With nothing polling, the queue holds at most max_buffered_bytes, and
// everything arrives in order once polling starts.
func TestBufferBoundedInBytes(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	cfg.MaxBufferedBytes = 64 << 10
	src := openSource(t, cfg, nil)
	pad := strings.Repeat("x", 1000)
	const n = 400
	for i := range n {
		if _, err := e.coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		used, _ := src.q.usage()
		if used > int64(cfg.MaxBufferedBytes)-2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d bytes, never filled to %d", used, cfg.MaxBufferedBytes)
		}
		time.Sleep(5 * time.Millisecond) // waiting on the reader goroutine filling the queue
	}
	got, err := pollUntil(t, src, countOps(n))
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range nonMarkers(got) {
		if docID(t, ev) != i {
			t.Fatalf("event %d has _id %d", i, docID(t, ev))
		}
	}
	if _, peak := src.q.usage(); peak > int64(cfg.MaxBufferedBytes) {
		t.Fatalf("queue peaked at %d bytes, over the budget of %d", peak, cfg.MaxBufferedBytes)
	}
}

// An event larger than the whole budget fails the source instead of
// waiting forever for room.
func TestEventLargerThanBufferFails(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	cfg.MaxBufferedBytes = 4 << 10
	src := openSource(t, cfg, nil)
	if _, err := e.coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}, {Key: "pad", Value: strings.Repeat("x", 8<<10)}}); err != nil {
		t.Fatal(err)
	}
	_, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, ErrEventTooLarge, "max_buffered_bytes")
}

func failPoint(t *testing.T, e *env, mode any, data bson.D) {
	t.Helper()
	err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data},
	}).Err()
	if err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
}

func testCommands(c *mongowire.Config) { c.EnableTestCommands = true }

// Connections cut and resumable errors mid-stream lose nothing and
// duplicate nothing.
func TestReconnectWithoutLoss(t *testing.T) {
	tests := map[string]bson.D{
		"connection closed": {{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "closeConnection", Value: true}},
		"resumable error": {{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "errorCode", Value: 6},
			{Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}}},
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, testCommands)
			src := openSource(t, e.config(t), nil)
			var got []cdc.Event
			next := 0
			for round := range 4 {
				for range 25 {
					insert(t, e.coll, next)
					next++
				}
				if round < 3 {
					failPoint(t, e, bson.D{{Key: "times", Value: 3}}, data)
				}
				before := len(nonMarkers(got))
				evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return before+len(nonMarkers(evs)) >= next })
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, evs...)
			}
			evs := nonMarkers(got)
			if len(evs) != next {
				t.Fatalf("got %d events, want %d", len(evs), next)
			}
			for i, ev := range evs {
				if docID(t, ev) != i {
					t.Fatalf("event %d has _id %d: lost or duplicated", i, docID(t, ev))
				}
			}
			if st := src.Stats(); st.Reconnects == 0 {
				t.Errorf("stats show no reconnect after three failed getMores in a row, %d times", 3)
			}
		})
	}
}

// Past max_reconnects consecutive failures the source fails.
func TestReconnectsBounded(t *testing.T) {
	e := newEnv(t, testCommands)
	cfg := e.config(t)
	cfg.MaxReconnects = 2
	src := openSource(t, cfg, nil)
	failPoint(t, e, "alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "closeConnection", Value: true}})
	t.Cleanup(func() { failPoint(t, e, "off", bson.D{}) })
	_, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, nil, "consecutive failures", "max_reconnects 2")
}

// Lost history stops the source with a message that says how to
// recover, and never restarts from "now".
func TestHistoryLost(t *testing.T) {
	e := newEnv(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 })
	cp := checkpointAfter(t, e.config(t))
	for i := range 300 {
		if _, err := e.coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("y", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	src := New(e.config(t))
	err := src.Open(t.Context(), &cp)
	if err == nil {
		// Some servers report it on the first getMore instead.
		_, err = pollUntil(t, src, func([]cdc.Event) bool { return false })
	}
	src.Close()
	wantErr(t, err, ErrHistoryLost, "history", "re-snapshot", "tide checkpoint reset",
		"tide snapshot -f FILE", "tide checkpoint set -f FILE --cluster-time T",
		"move a file sink's existing output aside (or delete it)", "refuses a non-empty file")
}

// A reconnect re-verifies the collection: one dropped and recreated while
// the stream was down is refused, not silently followed.
func TestReconnectRefusesRecreatedCollection(t *testing.T) {
	e := newEnv(t, testCommands)
	cfg := e.config(t)
	cfg.MaxReconnects = 1000
	src := openSource(t, cfg, nil)
	insert(t, e.coll, 1)
	if _, err := pollUntil(t, src, countOps(1)); err != nil {
		t.Fatal(err)
	}
	failPoint(t, e, "alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "closeConnection", Value: true}})
	// Once the source has seen a failure, no getMore is in flight that
	// could still read the drop.
	waitFor(t, "a failed getMore", func() bool { return src.Stats().Errors > 0 })
	ctx := context.Background()
	if err := e.coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	failPoint(t, e, "off", bson.D{})
	_, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, ErrIdentity, "collection_uuid changed", "tide checkpoint reset")
}

// before_change and full_document modes deliver pre- and post-images
// when the collection records them.
func TestImages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.client.Database("shop").RunCommand(ctx, bson.D{
		{Key: "collMod", Value: "orders"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}},
	}).Err(); err != nil {
		t.Fatalf("collMod: %v", err)
	}
	cfg := e.config(t)
	cfg.FullDocument, cfg.BeforeChange = "required", "required"
	src := openSource(t, cfg, nil)
	insert(t, e.coll, 1)
	if _, err := e.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	up := nonMarkers(got)[1]
	if n, _ := bson.Raw(up.PreImage).Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("pre-image = %v, want n: 1", bson.Raw(up.PreImage))
	}
	if n, _ := bson.Raw(up.FullDocument).Lookup("n").AsInt64OK(); n != 2 {
		t.Errorf("post-image = %v, want n: 2", bson.Raw(up.FullDocument))
	}
}
