package tide

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/dbzconsumer"
	"github.com/tide-cdc/tide/internal/testenv"
)

// TestDebeziumFormatFromYAML runs encode.format: debezium from the
// embedded server into a file, and reads every line with the consumer
// written from Debezium's documented field list: a snapshot read, an
// insert, an update (delta, with its pre-image), a replace and a delete.
func TestDebeziumFormatFromYAML(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database("inventory")
	ctx := t.Context()
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "customers"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("customers")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}, {Key: "name", Value: "Sally"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	text := fmt.Appendf(nil, `name: fulfillment
source:
  mongo:
    uri: %s
    database: inventory
    collection: customers
    before_change: when_available
sink:
  file: {path: %q}
encode: {format: debezium}
data_dir: %q
batch: {commit_interval: 10ms}
`, srv.URI(), out, filepath.Join(dir, "data"))

	p, err := build(ctx, text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(rctx) }()
	wait := func(n int64) {
		for p.Stats().EventsOut < n || p.Stats().LastCheckpoint.Source == nil {
			select {
			case <-time.After(10 * time.Millisecond):
			case err := <-errc:
				t.Fatalf("Run returned early: %v", err)
			case <-rctx.Done():
				t.Fatalf("events committed: %d, want %d", p.Stats().EventsOut, n)
			}
		}
	}
	wait(1) // the snapshot is written and the stream open
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int64(1002)}, {Key: "name", Value: "George"}}))
	must(coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Sally Ann"}}}}))
	must(coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int64(1002)}}, bson.D{{Key: "name", Value: "Jorge"}, {Key: "n", Value: int32(2)}}))
	must(coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: int64(1001)}}))
	wait(5)
	if err := p.Drain(rctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Drain = %v", err)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var evs []*dbzconsumer.Event
	for i, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		ev, err := dbzconsumer.Parse(l)
		if err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, l)
		}
		if ev.Source.Name != "fulfillment" || ev.Source.DB != "inventory" || ev.Source.Collection != "customers" {
			t.Errorf("line %d: source %+v", i+1, ev.Source)
		}
		evs = append(evs, ev)
	}
	var ops []string
	for _, ev := range evs {
		ops = append(ops, ev.Op)
	}
	if strings.Join(ops, " ") != "r c u u d" {
		t.Fatalf("ops %v, want r c u u d", ops)
	}
	doc := func(s string) bson.M {
		t.Helper()
		var m bson.M
		if err := bson.UnmarshalExtJSON([]byte(s), false, &m); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return m
	}
	if d := doc(evs[0].After); d["_id"] != int64(1001) || d["name"] != "Sally" || evs[0].Source.Snapshot != "true" {
		t.Errorf("snapshot read: after %v snapshot %q", d, evs[0].Source.Snapshot)
	}
	if evs[1].Source.Snapshot != "false" || evs[1].Source.TsMS == 0 || evs[1].Source.WallTime == nil {
		t.Errorf("insert source %+v", evs[1].Source)
	}
	up := evs[2]
	if up.After != "" || up.UpdateDescription == nil || doc(up.UpdateDescription.UpdatedFields)["name"] != "Sally Ann" ||
		doc(up.Before)["name"] != "Sally" {
		t.Errorf("update: after %q before %q updateDescription %+v", up.After, up.Before, up.UpdateDescription)
	}
	if d := doc(evs[3].After); d["name"] != "Jorge" || d["n"] != int32(2) || evs[3].UpdateDescription != nil {
		t.Errorf("replace: after %v updateDescription %+v", d, evs[3].UpdateDescription)
	}
	if del := evs[4]; del.After != "" || doc(del.Before)["name"] != "Sally Ann" {
		t.Errorf("delete: after %q before %q", del.After, del.Before)
	}
	for i := 2; i < len(evs); i++ {
		a, b := evs[i-1].Source, evs[i].Source
		if b.TsMS < a.TsMS || b.TsMS == a.TsMS && b.Ord <= a.Ord && i > 1 {
			t.Errorf("line %d: source (ts_ms %d, ord %d) does not follow (%d, %d)", i+1, b.TsMS, b.Ord, a.TsMS, a.Ord)
		}
	}
}
