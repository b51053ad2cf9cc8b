package mongowire_test

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// collMod converts an index to unique in mongod's two steps: prepareUnique
// refuses new duplicates, unique converts once none are left (359 with the
// violating _ids otherwise; dryRun only checks); forceNonUnique converts
// back. The changes survive a restart.
func TestCollModConvertToUnique(t *testing.T) {
	dir := t.TempDir()
	s := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = dir })
	c := testenv.MongoClient(t, s.URI())
	ctx := t.Context()
	db := c.Database("cu")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	collMod := func(index bson.D, extra ...bson.E) error {
		return db.RunCommand(ctx, append(bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: append(bson.D{{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}}, index...)}}, extra...)).Err()
	}
	wantCode(t, collMod(bson.D{{Key: "unique", Value: true}}), 72, "prepareUnique")
	wantCode(t, collMod(bson.D{{Key: "unique", Value: false}}), 2, "not supported")
	wantCode(t, collMod(bson.D{{Key: "unique", Value: "yes"}}), 14, "expected type 'bool'")
	if err := collMod(bson.D{{Key: "prepareUnique", Value: true}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "x", Value: 1}})
	wantCode(t, err, 11000, "dup key")
	for _, extra := range [][]bson.E{nil, {{Key: "dryRun", Value: true}}} {
		err = collMod(bson.D{{Key: "unique", Value: true}}, extra...)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 359 {
			t.Fatalf("unique over duplicates (%v) = %v, want 359", extra, err)
		}
		v, _ := bson.Raw(ce.Raw).LookupErr("violations", "0", "ids")
		if arr, ok := v.ArrayOK(); !ok || len(mustValues(t, arr)) != 2 {
			t.Fatalf("violations = %v, want the two _ids", bson.Raw(ce.Raw))
		}
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := collMod(bson.D{{Key: "unique", Value: true}}, bson.E{Key: "dryRun", Value: true}); err != nil {
		t.Fatalf("dry run without duplicates: %v", err)
	}
	if u := xUnique(t, coll); u {
		t.Fatal("the dry run converted the index")
	}
	var reply bson.Raw
	if reply, err = db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "unique", Value: true}}}}).Raw(); err != nil || !reply.Lookup("unique_new").Boolean() {
		t.Fatalf("convert to unique: %v %v", reply, err)
	}
	s.Close()
	s = testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = dir })
	c = testenv.MongoClient(t, s.URI())
	db = c.Database("cu")
	coll = db.Collection("c")
	if !xUnique(t, coll) {
		t.Fatal("unique lost at restart")
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 1}})
	wantCode(t, err, 11000, "dup key")
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "forceNonUnique", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert after forceNonUnique: %v", err)
	}
}

func mustValues(t *testing.T, arr bson.RawArray) []bson.RawValue {
	t.Helper()
	v, err := arr.Values()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func xUnique(t *testing.T, coll *mongo.Collection) bool {
	t.Helper()
	specs, err := coll.Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if sp.Name == "x_1" {
			return sp.Unique != nil && *sp.Unique
		}
	}
	t.Fatal("no x_1 index")
	return false
}

// A hidden index (at createIndexes or by collMod) is kept up to date but
// never used: explain shows a collection scan, and a hint naming it fails.
func TestHiddenIndex(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("hid")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetHidden(true)}); err != nil {
		t.Fatal(err)
	}
	stage := func() string {
		t.Helper()
		r, err := db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}}}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return r.Lookup("queryPlanner", "winningPlan").String()
	}
	if p := stage(); !strings.Contains(p, "COLLSCAN") {
		t.Fatalf("plan with the index hidden: %s, want a collection scan", p)
	}
	err := coll.FindOne(ctx, bson.D{{Key: "a", Value: 1}}, options.FindOne().SetHint("a_1")).Err()
	wantCode(t, err, 2, "hint provided does not correspond to an existing index")
	reply, err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{{Key: "name", Value: "a_1"}, {Key: "hidden", Value: false}}}}).Raw()
	if err != nil || !reply.Lookup("hidden_old").Boolean() || reply.Lookup("hidden_new").Boolean() {
		t.Fatalf("collMod hidden: false = %v %v", reply, err)
	}
	if p := stage(); !strings.Contains(p, "IXSCAN") {
		t.Fatalf("plan with the index shown again: %s, want an index scan", p)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "a", Value: 2}}); err != nil || n != 1 {
		t.Fatalf("count through the index kept up while hidden: %d %v", n, err)
	}
}

// Index fields mongod does not know, and those of index types this server
// lacks, are refused instead of stored and ignored.
func TestIndexSpecRefusals(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("ixr")
	create := func(index bson.D) error {
		return db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{index}}}).Err()
	}
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "bogus", Value: 1}}), 197, "The field 'bogus' is not valid for an index specification")
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "$**", Value: 1}}}, {Key: "name", Value: "w"}}), 115, "wildcard")
	wantCode(t, create(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "weights", Value: bson.D{{Key: "a", Value: 1}}}}), 197, "weights")
	if err := create(bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "background", Value: true}}); err != nil {
		t.Fatalf("background: %v", err)
	}
}
