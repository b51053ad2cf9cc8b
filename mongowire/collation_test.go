package mongowire_test

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The examples of MongoDB's collation documentation, with their
// documented results as the oracle.

func idsOf(t *testing.T, cur *mongo.Cursor, err error) []int32 {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.M
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	var out []int32
	for _, d := range docs {
		out = append(out, d["_id"].(int32))
	}
	return out
}

func wantIDs(t *testing.T, what string, got []int32, want ...int32) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: _ids %v, want %v", what, got, want)
	}
}

// TestCollationSortFrench: db.collection.find() "Specify Collation":
// sorting café, cafe, cafE binary gives cafE, cafe, café; with
// {locale: "fr"} it gives cafe, cafE, café; {locale: "fr", strength: 1}
// finds all three for "cafe".
func TestCollationSortFrench(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("co").Collection("myColl")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "category", Value: "café"}, {Key: "status", Value: "A"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "category", Value: "cafe"}, {Key: "status", Value: "a"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "category", Value: "cafE"}, {Key: "status", Value: "a"}},
	}); err != nil {
		t.Fatal(err)
	}
	byCategory := bson.D{{Key: "category", Value: 1}}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(byCategory))
	wantIDs(t, "binary sort", idsOf(t, cur, err), 3, 2, 1)
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetSort(byCategory).SetCollation(&options.Collation{Locale: "fr"}))
	wantIDs(t, "fr sort", idsOf(t, cur, err), 2, 3, 1)
	cur, err = coll.Find(ctx, bson.D{{Key: "category", Value: "cafe"}}, options.Find().SetCollation(&options.Collation{Locale: "fr", Strength: 1}))
	wantIDs(t, "fr strength 1", idsOf(t, cur, err), 1, 2, 3)
	cur, err = coll.Find(ctx, bson.D{{Key: "category", Value: "cafe"}}, options.Find().SetCollation(&options.Collation{Locale: "fr", Strength: 2}))
	wantIDs(t, "fr strength 2", idsOf(t, cur, err), 2, 3)

	// The same through aggregate: $match and $sort follow the collation.
	pipe := mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "category", Value: "CAFE"}}}}, {{Key: "$sort", Value: bson.D{{Key: "category", Value: -1}}}}}
	cur, err = coll.Aggregate(ctx, pipe, options.Aggregate().SetCollation(&options.Collation{Locale: "fr", Strength: 1}))
	wantIDs(t, "aggregate fr strength 1", idsOf(t, cur, err), 1, 2, 3)
}

// TestCollationCaseInsensitiveIndex: "Case-Insensitive Indexes": an index
// with a collation serves only queries with the same collation, and a
// collection's default collation is inherited by its indexes and its
// queries.
func TestCollationCaseInsensitiveIndex(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("co")

	fruit := db.Collection("fruit")
	en2 := &options.Collation{Locale: "en", Strength: 2}
	if _, err := fruit.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "type", Value: 1}}, Options: options.Index().SetCollation(en2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := fruit.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "type", Value: "apple"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "type", Value: "Apple"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "type", Value: "APPLE"}},
	}); err != nil {
		t.Fatal(err)
	}
	apple := bson.D{{Key: "type", Value: "apple"}}
	cur, err := fruit.Find(ctx, apple)
	wantIDs(t, "no collation", idsOf(t, cur, err), 1)
	cur, err = fruit.Find(ctx, apple, options.Find().SetCollation(en2))
	wantIDs(t, "the index's collation", idsOf(t, cur, err), 1, 2, 3)
	cur, err = fruit.Find(ctx, apple, options.Find().SetCollation(&options.Collation{Locale: "en", Strength: 1}))
	wantIDs(t, "another collation", idsOf(t, cur, err), 1, 2, 3)

	explain := func(coll *options.Collation) (index string) {
		cmd := bson.D{{Key: "find", Value: "fruit"}, {Key: "filter", Value: apple}}
		if coll != nil {
			cmd = append(cmd, bson.E{Key: "collation", Value: coll})
		}
		raw := run(t, db, bson.D{{Key: "explain", Value: cmd}})
		stage := raw.Lookup("queryPlanner", "winningPlan")
		if in, err := stage.Document().LookupErr("inputStage"); err == nil {
			stage = in
		}
		if s := stage.Document().Lookup("stage").StringValue(); s != "IXSCAN" {
			return s
		}
		if got := stage.Document().Lookup("collation", "strength"); got.Type == 0 || got.AsInt64() != 2 {
			t.Errorf("IXSCAN shows no collation with strength 2: %s", stage)
		}
		return stage.Document().Lookup("indexName").StringValue()
	}
	if got := explain(nil); got != "COLLSCAN" {
		t.Errorf("query without collation used %s, want COLLSCAN", got)
	}
	if got := explain(en2); got != "type_1" {
		t.Errorf("query with the index's collation used %s, want type_1", got)
	}
	if got := explain(&options.Collation{Locale: "en", Strength: 1}); got != "COLLSCAN" {
		t.Errorf("query with another collation used %s, want COLLSCAN", got)
	}

	// A collection's default collation: its index inherits it, its
	// queries use it unless they name another.
	if err := db.CreateCollection(ctx, "names", options.CreateCollection().SetCollation(&options.Collation{Locale: "en_US", Strength: 2})); err != nil {
		t.Fatal(err)
	}
	names := db.Collection("names")
	if _, err := names.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "first_name", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := names.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "first_name", Value: "Betsy"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "first_name", Value: "BETSY"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "first_name", Value: "betsy"}},
	}); err != nil {
		t.Fatal(err)
	}
	betsy := bson.D{{Key: "first_name", Value: "betsy"}}
	cur, err = names.Find(ctx, betsy)
	wantIDs(t, "default collation", idsOf(t, cur, err), 1, 2, 3)
	cur, err = names.Find(ctx, betsy, options.Find().SetCollation(&options.Collation{Locale: "en_US"}))
	wantIDs(t, "en_US strength 3", idsOf(t, cur, err), 3)

	lcur, err := names.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.Raw
	if err := lcur.All(ctx, &specs); err != nil || len(specs) != 2 {
		t.Fatalf("indexes %v, %v; want _id_ and first_name_1", specs, err)
	}
	for _, sp := range specs {
		coll, ok := sp.Lookup("collation").DocumentOK()
		if !ok || coll.Lookup("locale").StringValue() != "en_US" || coll.Lookup("strength").AsInt64() != 2 {
			t.Errorf("index %s: collation %v, want the collection's", sp.Lookup("name"), coll)
		}
	}
	info := run(t, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "names"}}}})
	got := info.Lookup("cursor", "firstBatch", "0", "options", "collation").Document()
	if got.Lookup("locale").StringValue() != "en_US" || got.Lookup("version").StringValue() != "57.1" || got.Lookup("caseFirst").StringValue() != "off" {
		t.Errorf("listCollections collation = %v, want en_US with every field", got)
	}
}

// TestCollationUnique: a unique index with a case-insensitive collation
// treats "apple" and "APPLE" as duplicates.
func TestCollationUnique(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("co").Collection("u")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}},
		Options: options.Index().SetUnique(true).SetCollation(&options.Collation{Locale: "en", Strength: 2})}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "apple"}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "APPLE"}})
	wantCode(t, err, 11000, "duplicate key")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "apples"}}); err != nil {
		t.Fatal(err)
	}
}

// TestCollationCommands: count, distinct, update, delete and
// findAndModify take a collation, as in the CRUD spec's collation cases.
func TestCollationCommands(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("co").Collection("cmds")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: "ping"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "x", Value: "PING"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "x", Value: "pong"}},
	}); err != nil {
		t.Fatal(err)
	}
	ci := &options.Collation{Locale: "en_US", Strength: 2}
	ping := bson.D{{Key: "x", Value: "PING"}}

	if n, err := coll.CountDocuments(ctx, ping, options.Count().SetCollation(ci)); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2", n, err)
	}
	// $expr compares under the collation too; $max compares under it and
	// returns the value, never its key; $maxN is refused.
	expr := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$x", "Ping"}}}}}
	cur, err := coll.Find(ctx, expr, options.Find().SetCollation(ci))
	wantIDs(t, "$expr", idsOf(t, cur, err), 1, 2)
	cur, err = coll.Find(ctx, expr)
	wantIDs(t, "$expr binary", idsOf(t, cur, err))
	var maxes []bson.M
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "top", Value: bson.D{{Key: "$max", Value: "$x"}}}, {Key: "set", Value: bson.D{{Key: "$addToSet", Value: "$x"}}}}}},
		{{Key: "$project", Value: bson.D{{Key: "top", Value: 1}, {Key: "n", Value: bson.D{{Key: "$size", Value: "$set"}}}, {Key: "e", Value: bson.D{{Key: "$max", Value: bson.A{"B", "a"}}}}}}},
	}, options.Aggregate().SetCollation(ci))
	if err == nil {
		err = cur.All(ctx, &maxes)
	}
	if err != nil || len(maxes) != 1 || maxes[0]["top"] != "pong" || maxes[0]["n"] != int32(2) || maxes[0]["e"] != "B" {
		t.Errorf("collated $max and $addToSet = %v, %v; want top pong, 2 distinct values, e B", maxes, err)
	}
	_, err = coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "m", Value: bson.D{{Key: "$maxN", Value: bson.D{{Key: "input", Value: bson.A{"$x"}}, {Key: "n", Value: 1}}}}}}}}}, options.Aggregate().SetCollation(ci))
	wantCode(t, err, 115, "$maxN")
	res := coll.Distinct(ctx, "x", bson.D{}, options.Distinct().SetCollation(ci))
	var vals []string
	if err := res.Decode(&vals); err != nil || !slices.Equal(vals, []string{"ping", "pong"}) {
		t.Errorf("distinct = %v, %v; want [ping pong] (the first of equal values)", vals, err)
	}
	var got bson.M
	err = coll.FindOneAndUpdate(ctx, ping, bson.D{{Key: "$set", Value: bson.D{{Key: "y", Value: 1}}}},
		options.FindOneAndUpdate().SetCollation(ci).SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&got)
	if err != nil || got["_id"] != int32(2) {
		t.Errorf("findOneAndUpdate = %v, %v; want _id 2", got, err)
	}
	ur, err := coll.UpdateMany(ctx, bson.D{{Key: "x", Value: "Ping"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}, options.UpdateMany().SetCollation(ci))
	if err != nil || ur.MatchedCount != 2 {
		t.Errorf("updateMany = %+v, %v; want 2 matched", ur, err)
	}
	// An upsert seeds the new document with the value as given, not its
	// collation key.
	ur, err = coll.UpdateOne(ctx, bson.D{{Key: "x", Value: "Pang"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 2}}}}, options.UpdateOne().SetCollation(ci).SetUpsert(true))
	if err != nil || ur.UpsertedCount != 1 {
		t.Fatalf("upsert = %+v, %v", ur, err)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: ur.UpsertedID}}).Decode(&got); err != nil || got["x"] != "Pang" {
		t.Errorf("upserted %v, %v; want x: Pang", got, err)
	}
	// Update operators compare under the collation: $addToSet sees "A"
	// in ["a"], $pull removes "a" for "A", $max of "a" and "B" is "B"
	// (binary: "a").
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "tags", Value: bson.A{"a"}}, {Key: "m", Value: "a"}}}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []bson.D{
		{{Key: "$addToSet", Value: bson.D{{Key: "tags", Value: "A"}}}},
		{{Key: "$push", Value: bson.D{{Key: "tags", Value: bson.D{{Key: "$each", Value: bson.A{"B", "c"}}, {Key: "$sort", Value: 1}}}}}},
		{{Key: "$max", Value: bson.D{{Key: "m", Value: "B"}}}},
	} {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, u, options.UpdateOne().SetCollation(ci)); err != nil {
			t.Fatal(err)
		}
	}
	var three bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&three); err != nil {
		t.Fatal(err)
	}
	if tags := three["tags"].(bson.A); len(tags) != 3 || tags[0] != "a" || tags[1] != "B" || three["m"] != "B" {
		t.Errorf("after the collated updates %v, want tags [a B c] and m B", three)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$pull", Value: bson.D{{Key: "tags", Value: "A"}}}}, options.UpdateOne().SetCollation(ci)); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&three); err != nil || len(three["tags"].(bson.A)) != 2 {
		t.Errorf("$pull under the collation: %v, %v; want a removed", three, err)
	}
	_, err = coll.UpdateOne(ctx, ping, bson.D{{Key: "$set", Value: bson.D{{Key: "tags.$[x]", Value: 1}}}}, options.UpdateOne().SetCollation(ci).SetArrayFilters([]any{bson.D{{Key: "x", Value: "a"}}}))
	wantCode(t, err, 115, "arrayFilters")
	dr, err := coll.DeleteMany(ctx, bson.D{{Key: "x", Value: "pInG"}}, options.DeleteMany().SetCollation(ci))
	if err != nil || dr.DeletedCount != 2 {
		t.Errorf("deleteMany = %+v, %v; want 2", dr, err)
	}
}

// TestCollationNumericOrdering: numericOrdering compares digits as
// numbers ("10" after "2"), documented under Collation Document.
func TestCollationNumericOrdering(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("co").Collection("num")
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: "10"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "n", Value: "2"}},
		bson.D{{Key: "_id", Value: int32(3)}, {Key: "n", Value: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetCollation(&options.Collation{Locale: "en", NumericOrdering: true}))
	wantIDs(t, "numericOrdering", idsOf(t, cur, err), 3, 2, 1)
	cur, err = coll.Find(ctx, bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: "9"}}}}, options.Find().SetCollation(&options.Collation{Locale: "en", NumericOrdering: true}))
	wantIDs(t, "numericOrdering $gt", idsOf(t, cur, err), 1)
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "n", Value: 1}}))
	wantIDs(t, "binary", idsOf(t, cur, err), 3, 1, 2)
}

// TestCollationRefused: malformed collations fail as mongod's parser
// fails them; options x/text cannot honour fail with CommandNotSupported.
func TestCollationRefused(t *testing.T) {
	_, c := setup(t)
	db := c.Database("co")
	tests := map[string]struct {
		collation bson.D
		code      int32
		msg       string
	}{
		"unknown locale":     {bson.D{{Key: "locale", Value: "xx_YY"}}, 2, "Field 'locale' is invalid"},
		"missing locale":     {bson.D{{Key: "strength", Value: 2}}, 40414, "locale"},
		"unknown field":      {bson.D{{Key: "locale", Value: "en"}, {Key: "colour", Value: 1}}, 40415, "colour"},
		"strength 6":         {bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 6}}, 9, "strength"},
		"strength string":    {bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: "2"}}, 14, "strength"},
		"bad caseFirst":      {bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "middle"}}, 9, "caseFirst"},
		"caseFirst upper":    {bson.D{{Key: "locale", Value: "en"}, {Key: "caseFirst", Value: "upper"}}, 115, "caseFirst"},
		"caseLevel":          {bson.D{{Key: "locale", Value: "en"}, {Key: "caseLevel", Value: true}}, 115, "caseLevel"},
		"simple with fields": {bson.D{{Key: "locale", Value: "simple"}, {Key: "strength", Value: 2}}, 9, "simple"},
		"old version":        {bson.D{{Key: "locale", Value: "en"}, {Key: "version", Value: "1.0"}}, 263, "version"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := db.RunCommand(t.Context(), bson.D{{Key: "find", Value: "c"}, {Key: "collation", Value: tt.collation}}).Err()
			wantCode(t, err, tt.code, tt.msg)
		})
	}
	// The simple collation, spelled out or empty, is binary.
	for _, coll := range []bson.D{{{Key: "locale", Value: "simple"}}, {}} {
		if err := db.RunCommand(t.Context(), bson.D{{Key: "find", Value: "c"}, {Key: "collation", Value: coll}}).Err(); err != nil {
			t.Errorf("collation %v: %v", coll, err)
		}
	}
}

// TestCollationViews: a view has its own default collation, its source's
// is not inherited (db.createView's documentation), and a query may not
// name another (167).
func TestCollationViews(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("co")
	en2 := &options.Collation{Locale: "en", Strength: 2}
	if err := db.CreateCollection(ctx, "src", options.CreateCollection().SetCollation(en2)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("src").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: "ping"}},
		bson.D{{Key: "_id", Value: int32(2)}, {Key: "x", Value: "PING"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "plain", "src", mongo.Pipeline{}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateView(ctx, "ci", "src", mongo.Pipeline{{{Key: "$sort", Value: bson.D{{Key: "x", Value: 1}}}}}, options.CreateView().SetCollation(en2)); err != nil {
		t.Fatal(err)
	}
	ping := bson.D{{Key: "x", Value: "PING"}}
	cur, err := db.Collection("src").Find(ctx, ping)
	wantIDs(t, "the collection's default", idsOf(t, cur, err), 1, 2)
	cur, err = db.Collection("plain").Find(ctx, ping)
	wantIDs(t, "a view without a collation compares binary", idsOf(t, cur, err), 2)
	cur, err = db.Collection("ci").Find(ctx, ping)
	wantIDs(t, "a view with one", idsOf(t, cur, err), 1, 2)
	cur, err = db.Collection("ci").Find(ctx, ping, options.Find().SetCollation(en2))
	wantIDs(t, "the view's own collation named", idsOf(t, cur, err), 1, 2)
	_, err = db.Collection("ci").Find(ctx, ping, options.Find().SetCollation(&options.Collation{Locale: "fr"}))
	wantCode(t, err, 167, "Cannot override a view's default collation")
	if n, err := db.Collection("ci").CountDocuments(ctx, bson.D{{Key: "x", Value: "Ping"}}); err != nil || n != 2 {
		t.Errorf("count through the view = %d, %v; want 2", n, err)
	}
}

// TestCollationTailable: a tailable cursor on a capped collection with a
// default collation matches under it.
func TestCollationTailable(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("co")
	if err := db.CreateCollection(ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(1<<20).
		SetCollation(&options.Collation{Locale: "en", Strength: 2})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("capped")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: int32(1)}, {Key: "x", Value: "ping"}}, bson.D{{Key: "_id", Value: int32(2)}, {Key: "x", Value: "PONG"}}}); err != nil {
		t.Fatal(err)
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "x", Value: "PING"}}, options.Find().SetCursorType(options.Tailable))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	if !cur.TryNext(ctx) || cur.Current.Lookup("_id").Int32() != 1 {
		t.Fatalf("tailable find under the default collation: %v, %v", cur.Current, cur.Err())
	}
}
