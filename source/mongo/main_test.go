package mongo

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// TestMain removes the tide binary the end-to-end tests built, after the
// leak check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testenv.RemoveTideBinary()
		os.Exit(code)
	}))
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// env is an embedded server, a driver client and the watched collection.
type env struct {
	srv    *mongowire.Server
	client *mongo.Client
	coll   *mongo.Collection
}

func newEnv(t testing.TB, opts ...func(*mongowire.Config)) *env {
	t.Helper()
	srv := testenv.MongoWire(t, opts...)
	c := testenv.MongoClient(t, srv.URI())
	coll := c.Database("shop").Collection("orders")
	if err := c.Database("shop").CreateCollection(context.Background(), "orders"); err != nil {
		t.Fatalf("create shop.orders: %v", err)
	}
	return &env{srv: srv, client: c, coll: coll}
}

func (e *env) config(t testing.TB) Config {
	return Config{
		URI: e.srv.URI(), Database: "shop", Collection: "orders",
		Snapshot: "never", MaxAwait: 100 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		ConnectTimeout: 3 * time.Second, Logger: testLogger(t),
	}
}

func openSource(t testing.TB, cfg Config, restored *cdc.Checkpoint) *Source {
	t.Helper()
	src := New(cfg)
	if err := src.Open(t.Context(), restored); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return src
}

// pollUntil polls src, waiting on Ready, until stop says enough or the
// source ends or fails; it returns the events and the final error (nil
// when stop ended it).
func pollUntil(t testing.TB, src cdc.Source, stop func([]cdc.Event) bool) ([]cdc.Event, error) {
	t.Helper()
	var got []cdc.Event
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		var err error
		got, err = src.Poll(t.Context(), got, 1000)
		if err != nil {
			return got, err
		}
		if stop(got) {
			return got, nil
		}
		select {
		case <-src.Ready():
		case <-deadline.C:
			t.Fatalf("poll: condition not reached within 20s; got %d events: %v", len(got), ops(got))
		}
	}
}

// nonMarkers returns the events that are not markers.
func nonMarkers(evs []cdc.Event) []cdc.Event {
	var out []cdc.Event
	for _, ev := range evs {
		if ev.Op != cdc.OpMarker {
			out = append(out, ev)
		}
	}
	return out
}

func countOps(n int) func([]cdc.Event) bool {
	return func(evs []cdc.Event) bool { return len(nonMarkers(evs)) >= n }
}

func ops(evs []cdc.Event) []cdc.Op {
	var out []cdc.Op
	for _, ev := range evs {
		out = append(out, ev.Op)
	}
	return out
}

// docID returns the _id of a document key as an int.
func docID(t testing.TB, ev cdc.Event) int {
	t.Helper()
	v, err := bson.Raw(ev.DocumentKey).LookupErr("_id")
	if err != nil {
		t.Fatalf("%s event has no documentKey._id: %v", ev.Op, err)
	}
	n, ok := v.AsInt64OK()
	if !ok {
		t.Fatalf("%s event: _id is %s", ev.Op, v.Type)
	}
	return int(n)
}

func insert(t testing.TB, coll *mongo.Collection, ids ...int) {
	t.Helper()
	for _, id := range ids {
		if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "n", Value: id}}); err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
	}
}

func wantErr(t testing.TB, err error, target error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("got %v, want %v", err, target)
	}
	for _, w := range words {
		if !contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
