package tide

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestManyCollectionsFromYAML builds a database-level pipeline from YAML,
// snapshots two collections, streams a change of each, drains, and
// resumes from the checkpoint (which holds the catalog of UUIDs).
func TestManyCollectionsFromYAML(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database("shop")
	for _, c := range []string{"orders", "cust_a", "tmp_x"} {
		if _, err := db.Collection(c).InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	text := fmt.Appendf(nil, `name: many
source:
  mongo:
    uri: %s
    database: shop
    collections: ["orders", "cust_*", "tmp_*"]
    exclude: ["tmp_*"]
    snapshot_parallelism: 2
sink:
  file: {path: %q}
data_dir: %q
batch: {commit_interval: 10ms}
`, srv.URI(), out, filepath.Join(dir, "data"))

	run := func(before int64, write func(), want int64) {
		p, err := build(t.Context(), text, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		wait := func(n int64) {
			for p.Stats().EventsOut < n || p.Stats().LastCheckpoint.Source == nil {
				select {
				case <-tick.C:
				case err := <-errc:
					t.Fatalf("Run returned early: %v", err)
				case <-ctx.Done():
					t.Fatalf("events committed: %d, want %d", p.Stats().EventsOut, n)
				}
			}
		}
		wait(before) // the source is open: what is written now is streamed
		write()
		wait(want)
		if err := p.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run after Drain = %v", err)
		}
	}
	insert := func(coll string, id int) {
		if _, err := db.Collection(coll).InsertOne(t.Context(), bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	run(2, func() { insert("orders", 2); insert("tmp_x", 2); insert("cust_a", 2) }, 4)
	run(0, func() { insert("cust_a", 3) }, 1)

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var ev struct {
			NS  string `bson:"_namespace"`
			Op  string `bson:"_op"`
			Key struct {
				ID int `bson:"_id"`
			} `bson:"_document_key"`
		}
		if err := bson.UnmarshalExtJSON(l, false, &ev); err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		got = append(got, fmt.Sprintf("%s %s %d", ev.Op, ev.NS, ev.Key.ID))
	}
	// The snapshot copies cust_a, then orders (name order, two at a
	// time: their documents may interleave, one each here).
	if len(got) != 5 || got[2] != "insert shop.orders 2" || got[3] != "insert shop.cust_a 2" || got[4] != "insert shop.cust_a 3" {
		t.Fatalf("file:\n%v", got)
	}
	if !(got[0] == "snapshot shop.cust_a 1" && got[1] == "snapshot shop.orders 1" || got[1] == "snapshot shop.cust_a 1" && got[0] == "snapshot shop.orders 1") {
		t.Fatalf("snapshot lines: %v", got[:2])
	}
}
