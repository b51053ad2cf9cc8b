package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/pipeline"
)

// runMongoCopyDemo is tide demo --to-mongo: the demo's writer changes
// demo.orders on one embedded server (A), and the pipeline keeps a second
// embedded server (B) in sync through the MongoDB sink, in mirror mode
// with the checkpoint in B's transactions. At the end it checks that B's
// demo.orders equals A's, document for document.
func runMongoCopyDemo(ctx context.Context, f demoFlags, stdout, stderr io.Writer) error {
	if err := checkDemoFlags(f); err != nil {
		return err
	}
	log := demoLogger(stderr)
	da, err := startDemoServer(ctx, filepath.Join(f.dir, "mongo-a"), log)
	if err != nil {
		return err
	}
	defer da.close()
	db, err := startDemoServer(ctx, filepath.Join(f.dir, "mongo-b"), log)
	if err != nil {
		return err
	}
	defer db.close()
	a, b, ca, cb, orders := da.srv, db.srv, da.client, db.client, da.orders
	fmt.Fprintf(stdout, "tide demo: embedded MongoDB A at %s; writing %d changes to demo.orders at %s; keeping a copy in embedded MongoDB B at %s\n",
		a.URI(), f.events, rateString(f.rate), b.URI())

	// Mirror mode needs every update's full document; a fresh start copies
	// what A holds already (a snapshot), then streams. The checkpoint is
	// in B, in the same transactions as the documents; the data
	// directory is locked all the same, which makes the demo single-owner.
	page := newDemoStatus()
	_, p, err := buildDemo(ctx, fmt.Appendf(nil, `name: demo-mongo
source:
  mongo: {uri: %q, database: demo, collection: orders, full_document: update_lookup, snapshot: initial, max_await: 100ms}
sink:
  mongo: {uri: %q, mode: mirror}
checkpoint: sink
data_dir: %q
batch: {commit_interval: 100ms}
`, a.URI(), b.URI(), filepath.Join(f.dir, ".tide")), page.options(log))
	if err != nil {
		return err
	}
	defer p.Close()
	page.tracker.Attach(p.Name, p, p.Source, nil)
	stopPage, err := page.serve(f, stdout, log)
	if err != nil {
		return err
	}
	defer stopPage()

	start := func() (demoProducer, error) {
		live, err := idsOf(ctx, orders)
		if err != nil {
			return nil, err
		}
		w := &demoWriter{coll: orders, log: bufio.NewWriter(io.Discard), live: live,
			rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7)), events: f.events, rate: f.rate}
		if len(live) > 0 {
			w.next = slices.Max(live)
			fmt.Fprintf(stdout, "resuming from the checkpoint in B: demo.orders holds %d documents on A\n", len(live))
		}
		return &copyProducer{w: w, a: ca, b: cb}, nil
	}
	res, err := demoRun{pipeline: p, committed: page.signal.committed, start: start, progress: f.progress, stderr: stderr, unit: "changes",
		status: func(time.Time) string { return "lag " + lagOf(p) }}.run(ctx)
	if err != nil {
		return err
	}
	printDemoStreamed(stdout, "", "changes", p.Stats(), res.took, nil)

	n, diff, err := compareCollections(context.WithoutCancel(ctx), ca, cb, "demo", "orders")
	if err != nil {
		return err
	}
	if diff == "" {
		fmt.Fprintf(stdout, "checked demo.orders on B: it holds exactly the %d documents of A, document for document\n", n)
	} else {
		fmt.Fprintf(stdout, "checked demo.orders on B: %s\n", diff)
	}
	if res.interrupted {
		fmt.Fprintln(stdout, "interrupted: run tide demo --to-mongo again to resume")
		return nil
	}
	if diff != "" {
		return fmt.Errorf("demo check failed: demo.orders on B differs from A after a run that was not interrupted: %s", diff)
	}
	return nil
}

// copyProducer is the demo's writer; it has caught up when B equals A.
type copyProducer struct {
	w    *demoWriter
	a, b *mongo.Client
}

func (c *copyProducer) produce(ctx context.Context) error { return c.w.produce(ctx) }

// caughtUp compares the collections; it is called once the writer is
// done, and again after each commit until they are equal.
func (c *copyProducer) caughtUp(pipeline.Stats) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, diff, err := compareCollections(ctx, c.a, c.b, "demo", "orders")
	return err == nil && diff == ""
}

func idsOf(ctx context.Context, coll *mongo.Collection) ([]int64, error) {
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("read the ids of demo.orders: %w", err)
	}
	defer cur.Close(ctx)
	var ids []int64
	for cur.Next(ctx) {
		if id, ok := cur.Current.Lookup("_id").AsInt64OK(); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, cur.Err()
}

// compareCollections compares db.coll on a and b, document for document
// (the BSON bytes, by _id). It returns the number of documents of a and
// "" if they are equal, else what differs.
func compareCollections(ctx context.Context, a, b *mongo.Client, db, coll string) (int, string, error) {
	read := func(c *mongo.Client) (map[string][]byte, error) {
		cur, err := c.Database(db).Collection(coll).Find(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("read %s.%s: %w", db, coll, err)
		}
		defer cur.Close(ctx)
		out := map[string][]byte{}
		for cur.Next(ctx) {
			out[string(cur.Current.Lookup("_id").Value)] = slices.Clone(cur.Current)
		}
		return out, cur.Err()
	}
	da, err := read(a)
	if err != nil {
		return 0, "", err
	}
	db2, err := read(b)
	if err != nil {
		return 0, "", err
	}
	missing, differ := 0, 0
	for id, doc := range da {
		other, ok := db2[id]
		switch {
		case !ok:
			missing++
		case !bytes.Equal(doc, other):
			differ++
		}
	}
	extra := len(db2) - (len(da) - missing)
	if missing == 0 && differ == 0 && extra == 0 {
		return len(da), "", nil
	}
	return len(da), fmt.Sprintf("of A's %d documents, %d are missing and %d differ; %d are extra", len(da), missing, differ, extra), nil
}
