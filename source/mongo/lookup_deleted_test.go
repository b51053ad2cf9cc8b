package mongo

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// TestLookupOfDeletedDocument: with full_document update_lookup, writers
// update documents three times and then delete them while the stream
// reads. A lookup reads a document as it is when the stream reads the
// change, so an update may carry a later version than its own, and one
// read after the delete carries only its delta: then an earlier update
// can have carried version 3 and a later one the delta of version 2. That
// is MongoDB's rule, not a reordering; the changes themselves must come
// once each, in order, and no lookup may be older than its change.
func TestLookupOfDeletedDocument(t *testing.T) {
	const docs, writers = 2000, 8
	e := newMultiEnv(t, "shop.a")
	fill(t, e, "shop.a", docs)
	cfg := e.config(t, "shop", "*")
	cfg.FullDocument = "update_lookup"
	src := openSource(t, cfg, nil)

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() { // owned by the test: waited for below
			defer wg.Done()
			coll := e.coll("shop.a")
			for id := w; id < docs; id += writers {
				for range 3 {
					if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
						errs <- err
						return
					}
				}
				if _, err := coll.DeleteOne(context.Background(), bson.D{{Key: "_id", Value: id}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }() // ends with the writers

	version := map[int]int64{} // the last update's own version; -1 once deleted
	deletes, gone, later := 0, 0, 0
	quiet := time.Time{}
	for {
		evs, err := src.Poll(t.Context(), nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range nonMarkers(evs) {
			id := docID(t, ev)
			switch ev.Op {
			case cdc.OpUpdate:
				own, ok := bson.Raw(ev.UpdateDesc).Lookup("updatedFields", "v").AsInt64OK()
				if !ok {
					t.Fatalf("update of %d without updatedFields.v: %v", id, bson.Raw(ev.UpdateDesc))
				}
				if want := version[id] + 1; version[id] < 0 || own != want {
					t.Fatalf("update of %d to version %d after version %d (-1: deleted)", id, own, version[id])
				}
				version[id] = own
				if ev.FullDocument == nil {
					gone++
					continue
				}
				looked, _ := bson.Raw(ev.FullDocument).Lookup("v").AsInt64OK()
				switch {
				case looked < own:
					t.Fatalf("update of %d to version %d carries version %d: a lookup older than its change", id, own, looked)
				case looked > own:
					later++
				}
			case cdc.OpDelete:
				if version[id] != 3 {
					t.Fatalf("delete of %d after version %d, want 3", id, version[id])
				}
				version[id] = -1
				deletes++
			default:
				t.Fatalf("unexpected %s of %d", ev.Op, id)
			}
		}
		select {
		case err := <-errs:
			t.Fatalf("writer: %v", err)
		case <-done:
			if deletes == docs {
				t.Logf("updates looked up after their delete: %d; carrying a later version: %d", gone, later)
				return
			}
			if quiet.IsZero() {
				quiet = time.Now()
			}
			if time.Since(quiet) > 30*time.Second {
				t.Fatalf("%d deletes of %d after the writers ended", deletes, docs)
			}
		default:
		}
	}
}
