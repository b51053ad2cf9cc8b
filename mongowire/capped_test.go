package mongowire_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

func ids(t *testing.T, cur *mongo.Cursor) []int {
	t.Helper()
	var out []int
	for cur.Next(t.Context()) {
		out = append(out, int(cur.Current.Lookup("_id").AsInt64()))
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCappedCollectionKeepsNewest(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("cap")
	if err := db.CreateCollection(ctx, "log", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096).SetMaxDocuments(3)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("log")
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, cur); len(got) != 3 || got[0] != 2 || got[2] != 4 {
		t.Fatalf("capped max 3 holds %v, want [2 3 4]", got)
	}
	// As on mongod 5.0+, the capped deletes are explicit oplog deletes.
	del, err := c.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: "cap.log"}}).Raw()
	if err != nil {
		t.Fatalf("no oplog delete for the capped removal: %v", err)
	}
	if id := del.Lookup("o", "_id").AsInt64(); id != 0 {
		t.Fatalf("first capped delete removed %d, want 0", id)
	}
	// The size bound: 100 documents of ~1 KB in 4096 bytes keep the last 3.
	if err := db.CreateCollection(ctx, "big", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096)); err != nil {
		t.Fatal(err)
	}
	pad := string(make([]byte, 1000))
	for i := range 100 {
		if _, err := db.Collection("big").InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err = db.Collection("big").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, cur); len(got) != 4 || got[3] != 99 {
		t.Fatalf("capped 4096 bytes of 1 KB documents holds %v, want the newest 4", got)
	}
	var spec bson.M
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "log"}})
	if err != nil || len(specs) != 1 || !specs[0].Options.Lookup("capped").Boolean() {
		t.Fatalf("listCollections: %v %v %v", specs, err, spec)
	}
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "nosize"}, {Key: "capped", Value: true}}).Err(), 72, "the 'size' field is required when 'capped' is true")
	// $collStats and collStats report the limits, as mongod does.
	st, err := db.Collection("log").Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if err != nil || !st.Next(ctx) {
		t.Fatalf("$collStats: %v", err)
	}
	ss := st.Current.Lookup("storageStats").Document()
	if !ss.Lookup("capped").Boolean() || ss.Lookup("maxSize").AsInt64() != 4096 || ss.Lookup("max").AsInt64() != 3 {
		t.Fatalf("$collStats storageStats of a capped collection = %v, want capped, maxSize 4096, max 3", ss)
	}
}

func TestTailableAwaitDataOnCappedCollection(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("cap")
	if err := db.CreateCollection(ctx, "q", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("q")
	// As mongod, a tailable cursor on an empty collection is not kept.
	empty, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.TailableAwait))
	if err != nil {
		t.Fatal(err)
	}
	if empty.ID() != 0 {
		t.Fatalf("tailable cursor on an empty capped collection has id %d, want 0", empty.ID())
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "k", Value: "x"}}, options.Find().SetCursorType(options.TailableAwait).SetMaxAwaitTime(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.Next(ctx) || cur.Current.Lookup("_id").AsInt64() != 1 {
		t.Fatalf("first document: %v %v", cur.Current, cur.Err())
	}
	if cur.ID() == 0 {
		t.Fatal("the tailable cursor was closed at the end of the data")
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "y"}}) // not matched
		coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "x"}})
	}()
	start := time.Now()
	if !cur.Next(ctx) || cur.Current.Lookup("_id").AsInt64() != 3 {
		t.Fatalf("awaited document: %v %v", cur.Current, cur.Err())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("awaitData answered after %v, want at the insert", d)
	}
	// Without awaitData an empty getMore returns at once.
	tc, err := coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(ctx)
	for tc.TryNext(ctx) {
	}
	if tc.Err() != nil || tc.ID() == 0 {
		t.Fatalf("tailable cursor after the data: %v, id %d", tc.Err(), tc.ID())
	}
	coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}})
	if !tc.TryNext(ctx) || tc.Current.Lookup("_id").AsInt64() != 4 {
		t.Fatalf("tailable getMore after an insert: %v %v", tc.Current, tc.Err())
	}

	// Refusals.
	plain := db.Collection("plain")
	plain.InsertOne(ctx, bson.D{})
	_, err = plain.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable))
	wantCode(t, err, 2, "tailable cursor requested on non capped collection")
	_, err = coll.Find(ctx, bson.D{}, options.Find().SetCursorType(options.Tailable).SetSort(bson.D{{Key: "_id", Value: 1}}))
	wantCode(t, err, 2, "cannot use tailable option with a sort other than {$natural: 1}")
	err = db.RunCommand(ctx, bson.D{{Key: "find", Value: "q"}, {Key: "awaitData", Value: true}}).Err()
	wantCode(t, err, 9, "Cannot set 'awaitData' without also setting 'tailable'")
	// Dropping the collection kills the cursor.
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if tc.TryNext(ctx) {
		t.Fatal("a document after the drop")
	}
	wantCode(t, tc.Err(), 175, "collection dropped")
}

func TestTailableOplog(t *testing.T) {
	s, c := setup(t)
	ctx := t.Context()
	now := s.Store().ClusterTime()
	oplog := c.Database("local").Collection("oplog.rs")
	cur, err := oplog.Find(ctx, bson.D{{Key: "ts", Value: bson.D{{Key: "$gt", Value: now}}}, {Key: "ns", Value: "tail.c"}},
		options.Find().SetCursorType(options.TailableAwait).SetMaxAwaitTime(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	go func() {
		time.Sleep(100 * time.Millisecond)
		c.Database("tail").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}})
	}()
	if !cur.Next(ctx) {
		t.Fatalf("no oplog entry: %v", cur.Err())
	}
	if op := cur.Current.Lookup("op").StringValue(); op != "i" {
		t.Fatalf("entry %v, want the insert", cur.Current)
	}
	if cur.ID() == 0 {
		t.Fatal("oplog tailable cursor closed")
	}
}

func TestCappedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ns := store.Namespace{DB: "db", Coll: "c"}
	if err := st.Create(ns, bson.D{{Key: "capped", Value: true}, {Key: "size", Value: int64(1 << 20)}, {Key: "max", Value: int64(2)}}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: i}})
		if _, errs := st.Insert(ns, []bson.Raw{doc}, true); len(errs) > 0 {
			t.Fatal(errs[0].Err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	docs, err := st.Find(ns, store.FindSpec{})
	if err != nil || len(docs) != 2 || docs[0].Lookup("_id").AsInt64() != 2 {
		t.Fatalf("after restart: %v %v, want [2 3]", docs, err)
	}
	if capped, _ := st.IsCapped(ns); !capped {
		t.Fatal("not capped after restart")
	}
}
