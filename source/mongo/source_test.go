package mongo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// A fresh start hands out a marker with the stream's start token first:
// nothing written before Open is replayed, nothing after it is missed.
func TestExactStart(t *testing.T) {
	e := newEnv(t)
	insert(t, e.coll, 1, 2, 3)
	src := openSource(t, e.config(t), nil)
	insert(t, e.coll, 4, 5)

	got, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Op != cdc.OpMarker || !bytes.HasPrefix(got[0].Pos, []byte(`{"resume_token":{"_data":"82`)) {
		t.Fatalf("first event = %s %s, want a marker with the start token", got[0].Op, got[0].Pos)
	}
	evs := nonMarkers(got)
	if len(evs) != 2 || docID(t, evs[0]) != 4 || docID(t, evs[1]) != 5 {
		t.Fatalf("got %v, want inserts of 4 and 5 only", ops(evs))
	}
}

// Every operation reaches the source with its fields; a drop ends the
// stream with an invalidate whose position is a start_after_token.
func TestEventMapping(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t)
	src := openSource(t, cfg, nil)
	ctx := context.Background()
	insert(t, e.coll, 1)
	if _, err := e.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 10}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "n", Value: 20}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	if !errors.Is(err, cdc.ErrEnd) {
		t.Fatalf("poll error = %v, want cdc.ErrEnd after the invalidate", err)
	}
	evs := nonMarkers(got)
	want := []cdc.Op{cdc.OpInsert, cdc.OpUpdate, cdc.OpReplace, cdc.OpDelete, cdc.OpDrop, cdc.OpInvalidate}
	if !slicesEqual(ops(evs), want) {
		t.Fatalf("ops = %v, want %v", ops(evs), want)
	}
	for _, ev := range evs {
		if ev.ClusterTime.T == 0 || ev.WallTimeMS == 0 || len(ev.ResumeToken) == 0 {
			t.Errorf("%s: cluster time %v, wall time %d, token %d bytes: want all set", ev.Op, ev.ClusterTime, ev.WallTimeMS, len(ev.ResumeToken))
		}
		if ev.Op != cdc.OpInvalidate && ev.Namespace != "shop.orders" {
			t.Errorf("%s: namespace %q, want shop.orders", ev.Op, ev.Namespace)
		}
	}
	if n, _ := bson.Raw(evs[0].FullDocument).Lookup("n").AsInt64OK(); n != 1 {
		t.Errorf("insert fullDocument = %v, want n: 1", bson.Raw(evs[0].FullDocument))
	}
	if v := bson.Raw(evs[1].UpdateDesc).Lookup("updatedFields", "n"); v.Type == 0 {
		t.Errorf("update description = %v, want updatedFields.n", bson.Raw(evs[1].UpdateDesc))
	}
	if evs[1].FullDocument != nil {
		t.Errorf("delta update carries a full document: %v", bson.Raw(evs[1].FullDocument))
	}
	if n, _ := bson.Raw(evs[2].FullDocument).Lookup("n").AsInt64OK(); n != 20 {
		t.Errorf("replace fullDocument = %v, want n: 20", bson.Raw(evs[2].FullDocument))
	}
	if docID(t, evs[3]) != 1 {
		t.Errorf("delete key = %v", bson.Raw(evs[3].DocumentKey))
	}
	inv := evs[5]
	if !bytes.HasPrefix(inv.Pos, []byte(`{"start_after_token":`)) {
		t.Errorf("invalidate position = %s, want a start_after_token", inv.Pos)
	}
	for i, ev := range evs[:5] {
		if !bytes.HasPrefix(ev.Pos, []byte(`{"resume_token":`)) {
			t.Errorf("event %d (%s) position = %s, want a resume_token", i, ev.Op, ev.Pos)
		}
	}
	st := src.Stats()
	if st.Events[cdc.OpInsert] != 1 || st.Events[cdc.OpInvalidate] != 1 {
		t.Errorf("stats = %v, want one insert and one invalidate", st.Events)
	}
}

// Renames and DDL events pass through with their descriptions in Extra.
func TestExpandedEventsPassThrough(t *testing.T) {
	e := newEnv(t)
	src := openSource(t, e.config(t), nil)
	ctx := context.Background()
	if _, err := e.coll.Indexes().CreateOne(ctx, indexModel("n")); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Database("admin").RunCommand(ctx, bson.D{
		{Key: "renameCollection", Value: "shop.orders"}, {Key: "to", Value: "shop.archive"},
	}).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	if !errors.Is(err, cdc.ErrEnd) {
		t.Fatalf("poll error = %v, want cdc.ErrEnd", err)
	}
	evs := nonMarkers(got)
	want := []cdc.Op{cdc.OpCreateIndex, cdc.OpRename, cdc.OpInvalidate}
	if !slicesEqual(ops(evs), want) {
		t.Fatalf("ops = %v, want %v", ops(evs), want)
	}
	if to := bson.Raw(evs[1].Extra).Lookup("to", "coll"); to.StringValue() != "archive" {
		t.Errorf("rename extra = %v, want to.coll archive", bson.Raw(evs[1].Extra))
	}
	if ix := bson.Raw(evs[0].Extra).Lookup("operationDescription"); ix.Type == 0 {
		t.Errorf("createIndexes extra = %v, want an operationDescription", bson.Raw(evs[0].Extra))
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Admission refuses what cannot be streamed, saying what to fix.
func TestAdmissionRefuses(t *testing.T) {
	e := newEnv(t)
	// The embedded server has no views yet (CommandNotSupported), so the
	// view refusal is checked only by admitOnce's type switch.
	tests := map[string]struct {
		edit  func(*Config)
		words []string
	}{
		"missing collection": {func(c *Config) { c.Collection = "nope" }, []string{"shop.nope does not exist", "createCollection"}},
		"required images":    {func(c *Config) { c.FullDocument = "required" }, []string{"changeStreamPreAndPostImages"}},
		"bad mode":           {func(c *Config) { c.BeforeChange = "sometimes" }, []string{`before_change: "sometimes"`}},
		"bad pipeline":       {func(c *Config) { c.Pipeline = `{"$match":{}}` }, []string{"pipeline"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := e.config(t)
			tc.edit(&cfg)
			src := New(cfg)
			err := src.Open(t.Context(), nil)
			src.Close()
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// An invalidate ends the stream with ErrInvalidated (still cdc.ErrEnd, so
// that what came before is delivered), naming the namespace, the event
// that caused it and what to do.
func TestInvalidateSaysWhy(t *testing.T) {
	tests := map[string]struct {
		cause func(context.Context, *env) error
		words []string
	}{
		"drop": {
			cause: func(ctx context.Context, e *env) error { return e.coll.Drop(ctx) },
			words: []string{"shop.orders", "after a drop event", "collection was dropped", "tide checkpoint reset", "move a file sink's output aside"},
		},
		"rename": {
			cause: func(ctx context.Context, e *env) error {
				return e.client.Database("admin").RunCommand(ctx, bson.D{
					{Key: "renameCollection", Value: "shop.orders"}, {Key: "to", Value: "shop.archive"},
				}).Err()
			},
			words: []string{"shop.orders", "after a rename event", "renamed to shop.archive", "point the pipeline's collection at the new name"},
		},
		"dropDatabase": {
			cause: func(ctx context.Context, e *env) error { return e.client.Database("shop").Drop(ctx) },
			words: []string{"shop.orders", "event", "dropped", "tide checkpoint reset"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			src := openSource(t, e.config(t), nil)
			insert(t, e.coll, 1)
			if err := tc.cause(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			got, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
			if !errors.Is(err, cdc.ErrEnd) {
				t.Fatalf("poll error = %v, want one wrapping cdc.ErrEnd", err)
			}
			wantErr(t, err, ErrInvalidated, tc.words...)
			evs := nonMarkers(got)
			if len(evs) < 2 || evs[0].Op != cdc.OpInsert || evs[len(evs)-1].Op != cdc.OpInvalidate {
				t.Fatalf("ops = %v, want the insert first and the invalidate last", ops(evs))
			}
		})
	}
}
