package tide_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// TestMongoSinkEmbedded: sink.mongo with uri: embedded writes into a
// second embedded server whose data is under data_dir/embedded-sink,
// exactly once with checkpoint: sink, and a second run of the finished
// pipeline adds nothing.
func TestMongoSinkEmbedded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := []byte(`name: gen-to-mongo
source: {generate: {count: 2500, payload_bytes: 8}}
sink: {mongo: {uri: embedded, mode: append, database: lake, collection: events}}
checkpoint: sink
data_dir: ` + filepath.Join(dir, "data") + `
batch: {max_records: 1000}
`)
	for range 2 {
		spec, err := tide.Parse(yaml, tide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := spec.Build(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if p.EmbeddedSink == nil {
			t.Fatal("no embedded sink server")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		err = p.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = filepath.Join(dir, "data", "embedded-sink") })
	c := testenv.MongoClient(t, srv.URI())
	n, err := c.Database("lake").Collection("events").CountDocuments(t.Context(), bson.D{})
	if err != nil || n != 2500 {
		t.Fatalf("lake.events holds %d documents (%v), want 2500", n, err)
	}
	n, err = c.Database("tide").Collection("tide_checkpoints").CountDocuments(t.Context(), bson.D{{Key: "_id", Value: "gen-to-mongo"}})
	if err != nil || n != 1 {
		t.Fatalf("%d checkpoint documents (%v), want 1", n, err)
	}
}
