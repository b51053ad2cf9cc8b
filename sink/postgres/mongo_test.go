package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jackc/pgx/v5"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// TestMongoMirror runs embedded MongoDB → Postgres mirror while a random
// workload of inserts, updates, replaces and deletes runs, and requires
// the table to equal the collection, document for document, with every
// deleted document marked deleted.
func TestMongoMirror(t *testing.T) {
	dsn := testenv.Postgres(t)
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	db := client.Database("shop")
	if err := db.CreateCollection(t.Context(), "orders"); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("orders")
	rng := rand.New(rand.NewPCG(7, 7))

	// Documents present before the pipeline starts reach the table
	// through the snapshot.
	nextID := int64(0)
	for range 50 {
		if _, err := coll.InsertOne(t.Context(), randomDoc(rng, nextID)); err != nil {
			t.Fatal(err)
		}
		nextID++
	}

	src := mongosource.New(mongosource.Config{URI: srv.URI(), Database: "shop", Collection: "orders",
		FullDocument: "update_lookup", Snapshot: "initial", MaxAwait: 50 * time.Millisecond, Logger: testLogger(t)})
	sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, SoftDelete: true,
		Pipeline: "mirror", Logger: testLogger(t)})
	p := pipeline.New(pipeline.Config{Name: "mirror", MaxRecords: 64, CommitInterval: 20 * time.Millisecond, Logger: testLogger(t)},
		src, encode.Envelope, sink, sink.Checkpoints())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Drain(dctx); err != nil {
			t.Errorf("drain: %v", err)
		}
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	// Start the workload once the snapshot is in: the stream then holds
	// every change of the workload, so every deleted document gets its
	// deleted row.
	c := connect(t, dsn)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int64
		if c.QueryRow(t.Context(), `SELECT count(*) FROM orders`).Scan(&n) == nil && n == nextID {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling for the snapshot
	}

	live := make([]int64, 0, 200)
	for id := range nextID {
		live = append(live, id)
	}
	ctx := t.Context()
	for range 800 {
		var err error
		switch r := rng.IntN(10); {
		case r < 3 || len(live) < 5:
			_, err = coll.InsertOne(ctx, randomDoc(rng, nextID))
			live = append(live, nextID)
			nextID++
		case r < 6:
			id := live[rng.IntN(len(live))]
			upd := bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: fmt.Sprint("s", rng.IntN(5))}, {Key: "nested.n", Value: rng.Float64()}}},
				{Key: "$inc", Value: bson.D{{Key: "count", Value: 1}}}}
			if rng.IntN(3) == 0 {
				upd = append(upd, bson.E{Key: "$unset", Value: bson.D{{Key: "tags", Value: ""}}})
			}
			_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, upd)
		case r < 8:
			id := live[rng.IntN(len(live))]
			_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, randomDoc(rng, id))
		default:
			i := rng.IntN(len(live))
			id := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// A last insert: once the mirror holds it as an insert (not as a
	// snapshot row), every change before it has been applied.
	if _, err := coll.InsertOne(ctx, randomDoc(rng, nextID)); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf(`{"_id":{"$numberLong":"%d"}}`, nextID)
	nextID++
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var op string
		if c.QueryRow(ctx, `SELECT _tide_op FROM orders WHERE _id = $1`, last).Scan(&op) == nil && op == "insert" {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling for the pipeline to catch up
	}
	want := collectionDocs(t, coll)
	got := tableDocs(t, c)
	if !reflect.DeepEqual(got, want) {
		for id, w := range want {
			if g, ok := got[id]; !ok {
				t.Errorf("document %s missing from the table", id)
			} else if !reflect.DeepEqual(g, w) {
				t.Errorf("document %s:\n table %v\n  coll %v", id, g, w)
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("document %s is in the table but not the collection", id)
			}
		}
		t.FailNow()
	}
	deleted := queryInt(t, c, `SELECT count(*) FROM orders WHERE _tide_deleted`)
	if total := int64(nextID); deleted != total-int64(len(want)) {
		t.Errorf("%d rows marked deleted, want %d (documents ever inserted %d, live %d)", deleted, total-int64(len(want)), total, len(want))
	}
	if n := queryInt(t, c, `SELECT count(*) FROM tide_checkpoints WHERE pipeline = 'mirror'`); n != 1 {
		t.Errorf("%d checkpoint rows, want 1", n)
	}
	t.Logf("%d live documents, %d deleted, %d rows", len(want), deleted, queryInt(t, c, `SELECT count(*) FROM orders`))
}

// randomDoc is a document of assorted BSON types.
func randomDoc(rng *rand.Rand, id int64) bson.D {
	d := bson.D{
		{Key: "_id", Value: id},
		{Key: "name", Value: fmt.Sprintf("item %d \"quoted\" ünï", rng.IntN(1000))},
		{Key: "price", Value: rng.Float64() * 100},
		{Key: "count", Value: int32(rng.IntN(50))},
		{Key: "big", Value: rng.Int64()},
		{Key: "when", Value: bson.NewDateTimeFromTime(time.UnixMilli(rng.Int64N(4e12)).UTC())},
		{Key: "ref", Value: bson.NewObjectID()},
		{Key: "nested", Value: bson.D{{Key: "n", Value: rng.Float64()}, {Key: "ok", Value: rng.IntN(2) == 0}}},
	}
	if rng.IntN(2) == 0 {
		d = append(d, bson.E{Key: "tags", Value: bson.A{"a", int32(rng.IntN(9)), nil}})
	}
	return d
}

// collectionDocs returns the collection's documents as parsed relaxed
// Extended JSON, by _id.
func collectionDocs(t *testing.T, coll *mongo.Collection) map[string]any {
	t.Helper()
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(context.Background())
	out := map[string]any{}
	for cur.Next(t.Context()) {
		j, err := encode.AppendRelaxed(nil, cur.Current)
		if err != nil {
			t.Fatal(err)
		}
		addDoc(t, out, j)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tableDocs returns the live documents of the mirror table, by _id.
func tableDocs(t *testing.T, c *pgx.Conn) map[string]any {
	t.Helper()
	rows, err := c.Query(t.Context(), `SELECT doc::text FROM orders WHERE NOT _tide_deleted`)
	if err != nil {
		return nil // the table may not exist yet
	}
	defer rows.Close()
	out := map[string]any{}
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			t.Fatal(err)
		}
		addDoc(t, out, []byte(j))
	}
	return out
}

func addDoc(t *testing.T, out map[string]any, j []byte) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
	out[fmt.Sprint(doc["_id"])] = doc
}
