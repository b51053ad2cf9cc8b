package tide_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// TestMongoSinkDeadLetters: with on_error: dead_letter, the MongoDB sink
// keeps the changes that fail a transform in tide_dead_letters, in the
// transaction of their batch (checkpoint: sink), each once across a
// second run; the good ones, transformed, reach the target.
func TestMongoSinkDeadLetters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := []byte(`name: gen-to-mongo-dl
source: {generate: {count: 300, payload_bytes: 4}}
sink: {mongo: {uri: embedded, mode: mirror, database: lake, collection: events}}
checkpoint: sink
data_dir: ` + filepath.Join(dir, "data") + `
batch: {max_records: 100}
transforms:
  - set: {tenth: 'doc.seq % 10 == 0 ? doc.payload * 2 : doc.seq / 10'}
  - drop_fields: [payload]
on_error: dead_letter
`)
	var spec *tide.Spec
	for range 2 {
		var err error
		if spec, err = tide.Parse(yaml, tide.Options{}); err != nil {
			t.Fatal(err)
		}
		p, err := spec.Build(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		err = p.Run(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	// tide dead-letters reads them from the sink's collection.
	letters, err := spec.DeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 30 || letters[0].Stage != "transform" || !strings.Contains(string(letters[0].Change.FullDocument), `"payload":"xxxx"`) {
		t.Fatalf("%d letters, first %+v", len(letters), letters[0])
	}
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = filepath.Join(dir, "data", "embedded-sink") })
	c := testenv.MongoClient(t, srv.URI())
	events := c.Database("lake").Collection("events")
	if n, err := events.CountDocuments(t.Context(), bson.D{}); err != nil || n != 270 {
		t.Fatalf("lake.events holds %d documents (%v), want 270", n, err)
	}
	var doc bson.M
	if err := events.FindOne(t.Context(), bson.D{{Key: "_id", Value: 23}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if _, has := doc["payload"]; has || doc["tenth"] != int32(2) {
		t.Fatalf("document 23 = %v, want tenth 2 and no payload", doc)
	}
	dead := c.Database("tide").Collection("tide_dead_letters")
	if n, err := dead.CountDocuments(t.Context(), bson.D{{Key: "stage", Value: "transform"}}); err != nil || n != 30 {
		t.Fatalf("tide_dead_letters holds %d transform letters (%v), want 30", n, err)
	}
	var l struct {
		Pipeline string `bson:"pipeline"`
		Document struct {
			Payload string `bson:"payload"`
		} `bson:"document"`
	}
	if err := dead.FindOne(t.Context(), bson.D{{Key: "position", Value: `{"seq":10}`}}).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if l.Document.Payload != "xxxx" || l.Pipeline != "gen-to-mongo-dl" {
		t.Fatalf("letter = %+v, want the original document", l)
	}
}

// TestMongoSinkRoute: {route} in the collection names it by a route
// transform.
func TestMongoSinkRoute(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := []byte(`name: gen-to-mongo-route
source: {generate: {count: 20, payload_bytes: 1}}
sink: {mongo: {uri: embedded, mode: append, database: lake, collection: "by_{route}"}}
data_dir: ` + filepath.Join(dir, "data") + `
transforms:
  - route: 'doc.seq % 2 == 0 ? "even" : "odd"'
`)
	spec, err := tide.Parse(yaml, tide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = filepath.Join(dir, "data", "embedded-sink") })
	c := testenv.MongoClient(t, srv.URI())
	for _, coll := range []string{"by_even", "by_odd"} {
		if n, err := c.Database("lake").Collection(coll).CountDocuments(t.Context(), bson.D{}); err != nil || n != 10 {
			t.Fatalf("lake.%s holds %d documents (%v), want 10", coll, n, err)
		}
	}
}
