package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// TestMongoDelta runs embedded MongoDB → Postgres mirror with
// full_document delta (no lookup) while a random workload of inserts,
// replaces, deletes and updates of every shape runs: fields set at
// flattened paths and deeper ones, inside arrays, removed, replaced by
// objects, changing type, and arrays truncated. Several updates of one
// document land in one batch. At the end each table equals its
// collection, value for value, in both layouts.
func TestMongoDelta(t *testing.T) {
	for name, columns := range map[string]string{"typed": postgres.ColumnsAuto, "document": postgres.ColumnsDocument} {
		t.Run(name, func(t *testing.T) {
			dsn := testenv.Postgres(t)
			srv := testenv.MongoWire(t)
			client := testenv.MongoClient(t, srv.URI())
			db := client.Database("shop")
			if err := db.CreateCollection(t.Context(), "orders"); err != nil {
				t.Fatal(err)
			}
			coll := db.Collection("orders")
			rng := rand.New(rand.NewPCG(11, 3))
			nextID := int64(0)
			for range 30 {
				if _, err := coll.InsertOne(t.Context(), randomDoc(rng, nextID)); err != nil {
					t.Fatal(err)
				}
				nextID++
			}

			// The default full_document, delta, as FitSource sees it.
			srcCfg := mongosource.Config{URI: srv.URI(), Database: "shop", Collection: "orders",
				Snapshot: "initial", MaxAwait: 50 * time.Millisecond, Logger: testLogger(t)}
			cfg := postgres.DefaultConfig()
			cfg.DSN, cfg.Columns, cfg.Pipeline, cfg.Logger = dsn, columns, "delta", testLogger(t)
			if err := cfg.FitSource(srcCfg.Describe()); err != nil {
				t.Fatal(err)
			}
			if !cfg.PartialUpdates || cfg.Table != "orders" {
				t.Fatalf("FitSource: PartialUpdates %v, table %q; want true, orders", cfg.PartialUpdates, cfg.Table)
			}
			sink := postgres.New(cfg)
			p := pipeline.New(pipeline.Config{Name: "delta", MaxRecords: 64, CommitInterval: 20 * time.Millisecond, Logger: testLogger(t)},
				mongosource.New(srcCfg), encode.Envelope, sink, sink.Checkpoints())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(context.Background()) }()
			stopped := false
			stop := func() {
				if stopped {
					return
				}
				stopped = true
				dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := p.Drain(dctx); err != nil {
					t.Errorf("drain: %v", err)
				}
				if err := <-errc; err != nil {
					t.Errorf("run: %v", err)
				}
			}
			defer stop()

			c := connect(t, dsn)
			waitFor(t, func() bool {
				var n int64
				return c.QueryRow(t.Context(), `SELECT count(*) FROM orders`).Scan(&n) == nil && n == nextID
			})
			live := make([]int64, 0, 100)
			for id := range nextID {
				live = append(live, id)
			}
			ctx := t.Context()
			for i := range 600 {
				var err error
				id := live[rng.IntN(len(live))]
				switch r := rng.IntN(20); {
				case r < 2 || len(live) < 5:
					_, err = coll.InsertOne(ctx, randomDoc(rng, nextID))
					live = append(live, nextID)
					nextID++
				case r < 3:
					_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, randomDoc(rng, id))
				case r < 4:
					j := slicesIndex(live, id)
					live[j] = live[len(live)-1]
					live = live[:len(live)-1]
					_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
				default:
					_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, randomUpdate(rng, i))
					var we mongo.WriteException
					if errors.As(err, &we) {
						err = nil // an update the document's shape refuses ($inc of text, a path through a scalar)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: nextID}, {Key: "last", Value: true}}); err != nil {
				t.Fatal(err)
			}
			lastID := nextID
			nextID++
			waitFor(t, func() bool {
				var op string
				key := any(lastID)
				q := `SELECT _tide_op FROM orders WHERE _id = $1`
				if columns == postgres.ColumnsDocument {
					key = fmt.Sprintf(`{"_id":{"$numberLong":"%d"}}`, lastID)
				}
				return c.QueryRow(ctx, q, key).Scan(&op) == nil && op == "insert"
			})
			stop()

			if columns == postgres.ColumnsDocument {
				want, got := collectionDocs(t, coll), tableDocs(t, c)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("the table's %d live documents differ from the collection's %d", len(got), len(want))
					for id, w := range want {
						if g := got[id]; !reflect.DeepEqual(g, w) {
							t.Errorf("document %s:\n table %v\n  coll %v", id, g, w)
						}
					}
				}
			} else {
				testenv.CompareTyped(t, c, "orders", collectionRaw(t, coll))
			}
			deltas := queryInt(t, c, `SELECT count(*) FROM orders WHERE _tide_op = 'update'`)
			t.Logf("%d live documents, %d rows last changed by an update", len(live), deltas)
			if deltas == 0 {
				t.Error("no row was changed by an update")
			}
		})
	}
}

// randomUpdate returns an update of one of many shapes; i makes values
// differ.
func randomUpdate(rng *rand.Rand, i int) any {
	set := func(kv ...any) bson.D {
		var d bson.D
		for j := 0; j < len(kv); j += 2 {
			d = append(d, bson.E{Key: kv[j].(string), Value: kv[j+1]})
		}
		return bson.D{{Key: "$set", Value: d}}
	}
	switch rng.IntN(16) {
	case 0:
		return set("status", "s"+strconv.Itoa(i), "nested.n", float64(i))
	case 1:
		return bson.D{{Key: "$inc", Value: bson.D{{Key: "count", Value: int32(1)}}}}
	case 2: // a new field, then a new flattened one
		return set("extra"+strconv.Itoa(i%5), int64(i), "addr.city", fmt.Sprint("c", i))
	case 3: // deeper than flatten_depth: inside the jsonb column meta__deep
		return set("meta.deep.x", int32(i), "meta.deep.list", bson.A{"a", int32(i)})
	case 4:
		return bson.D{{Key: "$unset", Value: bson.D{{Key: "nested.ok", Value: ""}, {Key: "meta.deep.x", Value: ""}}}}
	case 5: // an array element
		return set("tags.1", fmt.Sprint("t", i))
	case 6:
		return bson.D{{Key: "$push", Value: bson.D{{Key: "tags", Value: int32(i)}}}}
	case 7: // an object replacing the flattened one: nested.ok goes
		return set("nested", bson.D{{Key: "n", Value: int32(i)}, {Key: "z", Value: "zz"}})
	case 8: // drift: count becomes text
		return set("count", fmt.Sprint("n", i))
	case 9:
		return bson.D{{Key: "$unset", Value: bson.D{{Key: "tags", Value: ""}}}}
	case 10: // a scalar where an object was
		return set("nested", fmt.Sprint("flat", i))
	case 11: // truncate an array (a pipeline update)
		return mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "tags", Value: bson.D{{Key: "$slice", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$tags", bson.A{}}}}, 1}}}}}}}}
	case 12:
		return set("when", bson.NewDateTimeFromTime(time.UnixMilli(int64(i)*1e9).UTC()), "big", float64(i)+0.5)
	case 13: // an array element past the end, and an empty object
		return set("tags.5", int32(i), "empty", bson.D{})
	case 14:
		return set("empty.k", int32(i))
	default:
		return set("status", nil)
	}
}

func slicesIndex(s []int64, v int64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling for the pipeline to catch up
	}
	t.Fatal("timed out waiting for the pipeline")
}

// collectionRaw returns the collection's documents by the text of their
// _id, as a typed table's _id column reads.
func collectionRaw(t *testing.T, coll *mongo.Collection) map[string]bson.Raw {
	t.Helper()
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(context.Background())
	out := map[string]bson.Raw{}
	for cur.Next(t.Context()) {
		id := cur.Current.Lookup("_id")
		out[fmt.Sprint(id.AsInt64())] = append(bson.Raw(nil), cur.Current...)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deltaEvent is an update of id carrying only its update description.
func deltaEvent(t testing.TB, id any, desc bson.D, ts, inc uint32, pos string) cdc.Record {
	t.Helper()
	rec := event(t, cdc.OpUpdate, id, nil, ts, inc, pos)
	var err error
	if rec.UpdateDesc, err = bson.Marshal(desc); err != nil {
		t.Fatal(err)
	}
	return rec
}

func setFields(kv ...any) bson.D {
	var d bson.D
	for i := 0; i < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return bson.D{{Key: "updatedFields", Value: d}}
}

// TestDeltaRules: updates without their document set only what their
// description changes, through the typing rules of inserts, in event
// order within a batch and among inserts, replaces and deletes of the
// same key; an update whose row is missing fails its batch, checkpoint
// and all; an edit the sink cannot make without the document is refused
// by name.
func TestDeltaRules(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "orders")
	cfg.Pipeline, cfg.PartialUpdates = "delta-rules", true
	cfg.ColumnTypes = map[string]string{"price": "numeric(6,2)"}
	s := openKeepingSink(t, cfg)
	n := 0
	ckpt := func() cdc.Checkpoint {
		n++
		return cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"seq":%d}`, n))}
	}
	doc := bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}, {Key: "c", Value: "x"}}}, {Key: "tags", Value: bson.A{int32(1), int32(2), int32(3), int32(4)}},
		{Key: "meta", Value: bson.D{{Key: "deep", Value: bson.D{{Key: "x", Value: int32(1)}}}}}, {Key: "v", Value: int32(1)}, {Key: "price", Value: 1.5}}
	err := writeBatch(t, s, ckpt(),
		event(t, cdc.OpInsert, int64(1), doc, 10, 1, "1"),
		deltaEvent(t, int64(1), append(setFields("a.b", int64(1)<<40, "tags.1", "two", "meta.deep.y", bson.A{true}, "v", int32(2), "new.f", 2.5),
			bson.E{Key: "removedFields", Value: bson.A{"a.c", "meta.deep.x"}}), 10, 2, "2"),
		deltaEvent(t, int64(1), append(setFields("v", "three", "price", 12345.678),
			bson.E{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "tags"}, {Key: "newSize", Value: int32(3)}}}}), 10, 3, "3"),
		deltaEvent(t, int64(1), setFields("tags.6", int32(7)), 10, 11, "3b"),
		// Key 2: deleted, inserted again, then updated, in one batch.
		event(t, cdc.OpInsert, int64(2), bson.D{{Key: "v", Value: int32(20)}}, 10, 4, "4"),
		event(t, cdc.OpDelete, int64(2), nil, 10, 5, "5"),
		event(t, cdc.OpInsert, int64(2), bson.D{{Key: "v", Value: int32(21)}, {Key: "w", Value: int32(1)}}, 10, 6, "6"),
		deltaEvent(t, int64(2), setFields("w", int32(2)), 10, 7, "7"),
		// Key 3: updated, then replaced: the replace decides.
		event(t, cdc.OpInsert, int64(3), bson.D{{Key: "v", Value: int32(30)}}, 10, 8, "8"),
		deltaEvent(t, int64(3), setFields("v", int32(31), "gone", true), 10, 9, "9"),
		event(t, cdc.OpReplace, int64(3), bson.D{{Key: "v", Value: int32(32)}}, 10, 10, "10"),
		// Key 5: a.b is an object, which the integer column a__b cannot
		// hold: it lives in _tide_overflow, and is edited there.
		event(t, cdc.OpInsert, int64(5), bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "c", Value: int32(1)}, {Key: "e", Value: bson.A{int32(1), int32(2)}}}}}}}, 10, 12, "12"),
		deltaEvent(t, int64(5), append(setFields("a.b.d", "two", "a.b.e.2", int32(3)), bson.E{Key: "removedFields", Value: bson.A{"a.b.c"}}), 10, 13, "13"),
		// Key 6: a field whose name holds a dot, which disambiguatedPaths
		// tells from a path.
		event(t, cdc.OpInsert, int64(6), bson.D{{Key: "x.y", Value: int32(1)}, {Key: "x", Value: bson.D{{Key: "y", Value: int32(2)}}}}, 10, 14, "14"),
		deltaEvent(t, int64(6), append(setFields("x.y", int32(3)),
			bson.E{Key: "disambiguatedPaths", Value: bson.D{{Key: "x.y", Value: bson.A{"x.y"}}}}), 10, 15, "15"),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bson.D{
		"1": {{Key: "a", Value: bson.D{{Key: "b", Value: int64(1) << 40}}},
			{Key: "tags", Value: bson.A{int32(1), "two", int32(3), nil, nil, nil, int32(7)}},
			{Key: "meta", Value: bson.D{{Key: "deep", Value: bson.D{{Key: "y", Value: bson.A{true}}}}}},
			{Key: "v", Value: "three"}, {Key: "price", Value: 12345.678}, {Key: "new", Value: bson.D{{Key: "f", Value: 2.5}}}},
		"2": {{Key: "v", Value: int32(21)}, {Key: "w", Value: int32(2)}},
		"3": {{Key: "v", Value: int32(32)}},
		"5": {{Key: "a", Value: bson.D{{Key: "b", Value: bson.D{{Key: "e", Value: bson.A{int32(1), int32(2), int32(3)}}, {Key: "d", Value: "two"}}}}}},
		"6": {{Key: "x.y", Value: int32(3)}, {Key: "x", Value: bson.D{{Key: "y", Value: int32(2)}}}},
	}
	testenv.CompareTyped(t, c, "orders", want)
	types := columnTypes(t, c, "orders")
	for col, typ := range map[string]string{"a__b": "bigint", "new__f": "double precision", "v": "integer", "meta__deep": "jsonb"} {
		if types[col] != typ {
			t.Errorf("column %s is %q, want %q", col, types[col], typ)
		}
	}
	for _, col := range []string{"tags__1", "tags__6"} {
		if typ, ok := types[col]; ok {
			t.Errorf("an array index made column %s (%s)", col, typ)
		}
	}
	if got := queryText(t, c, `SELECT _tide_overflow->>'v' FROM orders WHERE _id = 1`); got != "three" {
		t.Errorf("v of 1 in _tide_overflow = %q, want three (text does not fit integer)", got)
	}
	if got := queryText(t, c, `SELECT _tide_overflow ? 'price' FROM orders WHERE _id = 1`); got != "true" {
		t.Errorf("price that does not fit numeric(6,2) not in _tide_overflow: %s", got)
	}
	if got := queryText(t, c, `SELECT a__c FROM orders WHERE _id = 1`); got != "<NULL>" {
		t.Errorf("a__c = %q after its removal, want NULL", got)
	}
	if got := queryText(t, c, `SELECT _tide_op FROM orders WHERE _id = 1`); got != "update" {
		t.Errorf("_tide_op = %q, want update", got)
	}

	// Replayed (an at-least-once source after a crash): changes nothing.
	if err := writeBatch(t, s, ckpt(), deltaEvent(t, int64(1), setFields("v", "old"), 10, 2, "2")); err != nil {
		t.Fatalf("replayed update: %v", err)
	}
	testenv.CompareTyped(t, c, "orders", want)

	seq := queryText(t, c, `SELECT checkpoint::text FROM tide_checkpoints WHERE pipeline = 'delta-rules'`)
	fails := map[string]struct {
		recs []cdc.Record
		want []string
	}{
		"a key with no row": {[]cdc.Record{
			event(t, cdc.OpInsert, int64(1), bson.D{{Key: "v", Value: int32(5)}}, 20, 1, "20"),
			deltaEvent(t, int64(9), setFields("v", int32(1)), 20, 2, "21")},
			[]string{"found no row", "snapshot", `"_id":{"$numberLong":"9"}`}},
		"a deleted row": {[]cdc.Record{
			event(t, cdc.OpDelete, int64(3), nil, 20, 1, "20"),
			deltaEvent(t, int64(3), setFields("v", int32(1)), 20, 2, "21")},
			[]string{"found no row"}},
	}
	for name, tc := range fails {
		err := writeBatch(t, s, ckpt(), tc.recs...)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
	}
	// Nothing of the failed batches committed: not their rows, not their
	// checkpoints.
	testenv.CompareTyped(t, c, "orders", want)
	if got := queryText(t, c, `SELECT checkpoint::text FROM tide_checkpoints WHERE pipeline = 'delta-rules'`); got != seq {
		t.Errorf("checkpoint %s after failed batches, want %s", got, seq)
	}
}

// TestDeltaDocument: the document layout applies an update description
// to doc with jsonb edits.
func TestDeltaDocument(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "docs", CreateTable: true, SoftDelete: true, PartialUpdates: true})
	err := writeBatch(t, s, cdc.Checkpoint{},
		event(t, cdc.OpInsert, "k", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: int32(1)}}}, {Key: "tags", Value: bson.A{"x", "y", "z"}}}, 1, 1, "1"),
		deltaEvent(t, "k", append(setFields("a.c.d", int64(5), "tags.4", "w"), bson.E{Key: "removedFields", Value: bson.A{"a.b"}}), 1, 2, "2"),
		deltaEvent(t, "k", bson.D{{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "tags"}, {Key: "newSize", Value: int32(2)}}}}}, 1, 3, "3"))
	if err != nil {
		t.Fatal(err)
	}
	got := queryText(t, c, `SELECT doc::text FROM docs WHERE _key = 'k'`)
	if want := `{"a": {"c": {"d": 5}}, "_id": "k", "tags": ["x", "y"]}`; !jsonEqual(got, want) {
		t.Errorf("doc = %s, want %s", got, want)
	}
	err = writeBatch(t, s, cdc.Checkpoint{}, deltaEvent(t, "nope", setFields("v", int32(1)), 2, 1, "4"))
	if err == nil || !strings.Contains(err.Error(), "found no row") {
		t.Errorf("update of a key with no row: %v; want found no row", err)
	}
}

// TestDeltaRename: updates without their document around a rename in
// one batch apply to the row where it is at their time: before the
// rename in the old table, after it in the new one.
func TestDeltaRename(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "{coll}")
	cfg.PartialUpdates = true
	s := openSink(t, cfg)
	upd := func(ns string, desc bson.D, ts, inc uint32, pos string) cdc.Record {
		rec := nsEvent(t, ns, cdc.OpUpdate, int32(1), nil, ts, inc, pos)
		var err error
		if rec.UpdateDesc, err = bson.Marshal(desc); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, nsEvent(t, "db.x", cdc.OpInsert, int32(1), bson.D{{Key: "v", Value: int32(1)}}, 10, 1, "1")); err != nil {
		t.Fatal(err)
	}
	err := writeBatch(t, s, cdc.Checkpoint{},
		upd("db.x", setFields("v", int32(2)), 11, 1, "2"),
		renameEvent(t, "db.x", "db.y", 11, 2, "3"),
		upd("db.y", setFields("w", int32(3)), 11, 3, "4"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.CompareTyped(t, c, "y", map[string]bson.D{"1": {{Key: "v", Value: int32(2)}, {Key: "w", Value: int32(3)}}})
	if n := queryInt(t, c, `SELECT count(*) FROM x WHERE NOT _tide_deleted`); n != 0 {
		t.Errorf("x holds %d live rows after its rename, want 0", n)
	}
}
