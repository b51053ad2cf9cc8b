package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/internal/testenv"
)

// recreateWorkload is the single writer of TestRecreateWhileStoppedSIGKILL:
// a seeded random mix of inserts, updates and deletes over shop.orders and
// shop.customers that now and then drops and re-creates shop.orders, or
// replaces it by renaming shop.staging over it (dropTarget). It logs every
// change, in order.
type recreateWorkload struct {
	db     *mongo.Database
	rng    *rand.Rand
	v      int64              // operations written
	live   map[string][]int64 // collection -> _ids that exist
	nextID int64
	log    []e2eChange
}

// recreateEndV is the v of the workload's last change, an insert into
// shop.orders, where the reference stream ends.
const recreateEndV = 1 << 40

func newRecreateWorkload(t *testing.T, uri string, seed uint64) *recreateWorkload {
	t.Helper()
	db := testenv.MongoClient(t, uri).Database(shopDB)
	for _, c := range []string{"orders", "customers"} {
		if err := db.CreateCollection(t.Context(), c); err != nil {
			t.Fatalf("create %s: %v", c, err)
		}
	}
	return &recreateWorkload{
		db:   db,
		rng:  rand.New(rand.NewPCG(seed, 25)),
		live: map[string][]int64{"orders": nil, "customers": nil},
	}
}

func (w *recreateWorkload) ns(c string) string { return shopDB + "." + c }

// insert writes one new document into c.
func (w *recreateWorkload) insert(ctx context.Context, c string) error {
	w.v++
	w.nextID++
	w.live[c] = append(w.live[c], w.nextID)
	w.log = append(w.log, e2eChange{NS: w.ns(c), Op: "insert", ID: w.nextID, V: w.v})
	_, err := w.db.Collection(c).InsertOne(ctx, shopDoc(w.nextID, w.v))
	return err
}

// recreate drops shop.orders and creates it again, or renames a new
// shop.staging over it, and inserts into the new collection.
func (w *recreateWorkload) recreate(ctx context.Context) error {
	if w.rng.IntN(2) == 0 {
		w.log = append(w.log, e2eChange{NS: w.ns("orders"), Op: "drop"}, e2eChange{NS: w.ns("orders"), Op: "create"})
		w.live["orders"] = nil
		if err := w.db.Collection("orders").Drop(ctx); err != nil {
			return err
		}
		if err := w.db.CreateCollection(ctx, "orders"); err != nil {
			return err
		}
	} else {
		w.log = append(w.log, e2eChange{NS: w.ns("staging"), Op: "create"})
		w.live["staging"] = nil
		if err := w.db.CreateCollection(ctx, "staging"); err != nil {
			return err
		}
		if err := w.insert(ctx, "staging"); err != nil {
			return err
		}
		w.log = append(w.log, e2eChange{NS: w.ns("staging"), Op: "rename", To: w.ns("orders")})
		w.live["orders"] = w.live["staging"]
		delete(w.live, "staging")
		err := w.db.Client().Database("admin").RunCommand(ctx, bson.D{
			{Key: "renameCollection", Value: w.ns("staging")}, {Key: "to", Value: w.ns("orders")}, {Key: "dropTarget", Value: true},
		}).Err()
		if err != nil {
			return err
		}
	}
	return w.insert(ctx, "orders")
}

// step writes one random change; one in twenty re-creates shop.orders.
func (w *recreateWorkload) step(ctx context.Context) error {
	if w.rng.IntN(20) == 0 {
		return w.recreate(ctx)
	}
	c := []string{"customers", "orders"}[w.rng.IntN(2)]
	ids := w.live[c]
	kind := w.rng.IntN(100)
	if len(ids) < 3 {
		kind = 0
	}
	switch {
	case kind < 55:
		return w.insert(ctx, c)
	case kind < 80:
		w.v++
		id := ids[w.rng.IntN(len(ids))]
		w.log = append(w.log, e2eChange{NS: w.ns(c), Op: "update", ID: id, V: w.v})
		_, err := w.db.Collection(c).UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: w.v}}}})
		return err
	default:
		w.v++
		k := w.rng.IntN(len(ids))
		id := ids[k]
		w.live[c] = slices.Delete(ids, k, k+1)
		w.log = append(w.log, e2eChange{NS: w.ns(c), Op: "delete", ID: id})
		_, err := w.db.Collection(c).DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		return err
	}
}

// TestRecreateWhileStoppedSIGKILL is issue 25's finding 4 end to end: a
// database-level pipeline (collections: ["*"]) over a workload that drops
// and re-creates shop.orders, or renames a collection over it, is
// SIGKILLed at random moments, and while it is down shop.orders is
// re-created again, so that every restart finds it with another UUID
// than its checkpoint's. Every restart must go on (it used to be refused
// at once), and the output must hold every change once, in the order of
// a reference change stream.
func TestRecreateWhileStoppedSIGKILL(t *testing.T) {
	t.Parallel()
	const kills, segment = 4, 120
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	srv := testenv.MongoWire(t)
	w := newRecreateWorkload(t, srv.URI(), seed)

	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: recreate
source:
  mongo:
    uri: %q
    database: shop
    collections: ["*"]
    max_await: 100ms
sink:
  file: {path: ./out/all.jsonl}
batch: {max_records: 20, commit_interval: 10ms}
`, srv.URI()))
	target := fileTarget(t, "recreate", dir, cfg)
	out := filepath.Join(dir, "out", "all.jsonl")

	var ref *refStream
	startRef := sync.OnceFunc(func() { ref = openRefStream(t, srv.URI(), recreateEndV) })
	ctx := t.Context()
	for i := range kills {
		before := target.progress()
		run := target.start()
		if i == 0 {
			waitFor(t, time.Minute, "first checkpoint", target.ready, run)
			startRef() // before the first write: the same range as the pipeline's
		}
		wrote := make(chan error, 1)
		mark := make(chan struct{})
		at := segment/8 + rng.IntN(segment*3/4)
		go func() {
			for k := range segment {
				if k == at {
					close(mark)
				}
				if err := w.step(ctx); err != nil {
					wrote <- fmt.Errorf("workload: %w", err)
					return
				}
			}
			wrote <- nil
		}()
		<-mark
		waitFor(t, time.Minute, fmt.Sprintf("progress in run %d", i+1), func() bool { return target.progress() != before }, run)
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // any moment will do
		run.kill()
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		// While the pipeline is down: the old collection's last change,
		// then a new collection under its name.
		if err := w.insert(ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		if err := w.recreate(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d: after %d changes; shop.orders re-created while down", i+1, len(w.log))
	}
	w.log = append(w.log, e2eChange{NS: w.ns("orders"), Op: "insert", ID: w.nextID + 1, V: recreateEndV})
	if _, err := w.db.Collection("orders").InsertOne(ctx, shopDoc(w.nextID+1, recreateEndV)); err != nil {
		t.Fatal(err)
	}
	want := ref.wait(t)
	sameChanges(t, "reference change stream against the writer's log", want, w.log)

	last := target.start()
	waitFor(t, 2*time.Minute, "every change", func() bool { return len(readChangesSoFar(t, out)) >= len(want) }, last)
	last.stop()
	sameChanges(t, "out/all.jsonl", readChanges(t, out), want)
}
