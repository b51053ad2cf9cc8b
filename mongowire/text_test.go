package mongowire_test

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// articles is the collection of the examples of MongoDB's $text
// documentation, with its text index on subject.
func articles(t *testing.T, c *mongo.Client) *mongo.Collection {
	t.Helper()
	coll := c.Database("text").Collection("articles")
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "subject", Value: "text"}}}); err != nil {
		t.Fatal(err)
	}
	doc := func(id int32, subject, author string, views int32) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "subject", Value: subject}, {Key: "author", Value: author}, {Key: "views", Value: views}}
	}
	if _, err := coll.InsertMany(t.Context(), []any{
		doc(1, "coffee", "xyz", 50),
		doc(2, "Coffee Shopping", "efg", 5),
		doc(3, "Baking a cake", "abc", 90),
		doc(4, "baking", "xyz", 100),
		doc(5, "Café Con Leche", "abc", 200),
		doc(6, "Сырники", "jkl", 80),
		doc(7, "coffee and cream", "efg", 10),
		doc(8, "Cafe con Leche", "xyz", 10),
	}); err != nil {
		t.Fatal(err)
	}
	return coll
}

// TestTextSearchDocumentedExamples: the $text operator page's examples,
// their documented results the oracle (as sets: the page gives no order).
func TestTextSearchDocumentedExamples(t *testing.T) {
	_, c := setup(t)
	coll := articles(t, c)
	tests := map[string]struct {
		text bson.D
		want []int32
	}{
		"single word":            {bson.D{{Key: "$search", Value: "coffee"}}, []int32{1, 2, 7}},
		"any of the terms":       {bson.D{{Key: "$search", Value: "bake coffee cake"}}, []int32{1, 2, 3, 4, 7}},
		"phrase":                 {bson.D{{Key: "$search", Value: "\"coffee shop\""}}, []int32{2}},
		"negation":               {bson.D{{Key: "$search", Value: "coffee -shop"}}, []int32{1, 7}},
		"language":               {bson.D{{Key: "$search", Value: "leche"}, {Key: "$language", Value: "es"}}, []int32{5, 8}},
		"case and diacritics":    {bson.D{{Key: "$search", Value: "сы́рники CAFÉS"}}, []int32{5, 6, 8}},
		"case sensitive":         {bson.D{{Key: "$search", Value: "Coffee"}, {Key: "$caseSensitive", Value: true}}, []int32{2}},
		"case sensitive phrase":  {bson.D{{Key: "$search", Value: "\"Café Con Leche\""}, {Key: "$caseSensitive", Value: true}}, []int32{5}},
		"case sensitive negated": {bson.D{{Key: "$search", Value: "Coffee -shop"}, {Key: "$caseSensitive", Value: true}}, []int32{2}},
		"diacritic sensitive":    {bson.D{{Key: "$search", Value: "CAFÉ"}, {Key: "$diacriticSensitive", Value: true}}, []int32{5}},
		"stop words only":        {bson.D{{Key: "$search", Value: "and a"}}, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cur, err := coll.Find(t.Context(), bson.D{{Key: "$text", Value: tt.text}})
			got := idsOf(t, cur, err)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("_ids %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTextScore: the documented score of "cake" in "Baking a cake" is
// 0.75; sorting by the score puts the document that is only "coffee"
// (1.0: one term, the whole string) first.
func TestTextScore(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := articles(t, c)
	var got []bson.M
	score := bson.D{{Key: "score", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}
	cur, err := coll.Find(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "cake"}}}}, options.Find().SetProjection(score))
	if err == nil {
		err = cur.All(ctx, &got)
	}
	if err != nil || len(got) != 1 || got[0]["score"] != 0.75 || got[0]["author"] != "abc" {
		t.Fatalf("cake = %v, %v; want _id 3 with score 0.75 and every field", got, err)
	}
	cur, err = coll.Find(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "coffee"}}}},
		options.Find().SetProjection(score).SetSort(score))
	got = nil
	if err == nil {
		err = cur.All(ctx, &got)
	}
	if err != nil || len(got) != 3 || got[0]["_id"] != int32(1) || got[0]["score"] != 1.0 || got[1]["score"] != 0.75 {
		t.Fatalf("coffee by score = %v, %v; want _id 1 first (1.0: the whole string, but not its stem coffe, so no 1.1), then 0.75", got, err)
	}

	// The same through aggregate: $text in the first $match, the score in
	// $sort and $project.
	cur, err = coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "coffee cake"}}}}}},
		{{Key: "$sort", Value: score}},
		{{Key: "$project", Value: bson.D{{Key: "subject", Value: 1}, {Key: "score", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}}},
	})
	got = nil
	if err == nil {
		err = cur.All(ctx, &got)
	}
	if err != nil || len(got) != 4 || got[0]["_id"] != int32(1) || got[3]["score"] != 0.75 || len(got[0]) != 3 {
		t.Fatalf("aggregate = %v, %v; want 4 documents, _id 1 first, with _id, subject and score only", got, err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "baking"}}}}); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2", n, err)
	}
}

// TestTextIndexSpec: the index mongod lists (and mongorestore sends
// back), weights in the score, one text index per collection, and the
// errors of a query without one.
func TestTextIndexSpec(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("text")
	blog := db.Collection("blog")
	_, err := blog.Find(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "x"}}}})
	wantCode(t, err, 27, "text index required for $text query")

	if _, err := blog.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "content", Value: "text"}, {Key: "keywords", Value: "text"}},
		Options: options.Index().SetWeights(bson.D{{Key: "keywords", Value: 10}}).SetName("TextIndex"),
	}); err != nil {
		t.Fatal(err)
	}
	raw := run(t, db, bson.D{{Key: "listIndexes", Value: "blog"}})
	spec := raw.Lookup("cursor", "firstBatch", "1").Document()
	if k := spec.Lookup("key").String(); k != `{"_fts": "text","_ftsx": {"$numberInt":"1"}}` {
		t.Errorf("key %s, want {_fts: text, _ftsx: 1}", k)
	}
	if w := spec.Lookup("weights"); w.Document().Lookup("keywords").AsInt64() != 10 || w.Document().Lookup("content").AsInt64() != 1 {
		t.Errorf("weights %s", w)
	}
	if spec.Lookup("default_language").StringValue() != "english" || spec.Lookup("textIndexVersion").AsInt64() != 3 || spec.Lookup("language_override").StringValue() != "language" {
		t.Errorf("spec %s, want mongod's text index fields", spec)
	}
	// Restoring: the listed spec, as mongorestore sends it, builds the same index.
	var specDoc bson.D
	if err := bson.Unmarshal(spec, &specDoc); err != nil {
		t.Fatal(err)
	}
	run(t, db, bson.D{{Key: "createIndexes", Value: "restored"}, {Key: "indexes", Value: bson.A{specDoc}}})
	restored := run(t, db, bson.D{{Key: "listIndexes", Value: "restored"}}).Lookup("cursor", "firstBatch", "1").Document()
	if restored.Lookup("weights").String() != spec.Lookup("weights").String() || restored.Lookup("key").String() != spec.Lookup("key").String() {
		t.Errorf("restored %s, want %s", restored, spec)
	}

	if _, err := blog.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "content", Value: "this morning I had a cup of coffee"}, {Key: "keywords", Value: bson.A{"breakfast"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "content", Value: "breakfast at the diner"}, {Key: "keywords", Value: bson.A{"coffee"}}},
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := blog.Find(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "coffee"}}}},
		options.Find().SetSort(bson.D{{Key: "s", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}))
	wantIDs(t, "weights", idsOf(t, cur, err), 2, 1) // keywords weigh 10

	_, err = blog.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "title", Value: "text"}}})
	wantCode(t, err, 67, "only one text index per collection")
	_, err = blog.InsertOne(ctx, bson.D{{Key: "content", Value: "x"}, {Key: "language", Value: "klingon"}})
	wantCode(t, err, 17262, "language override unsupported")
	_, err = blog.Find(ctx, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "x"}, {Key: "$language", Value: "de"}}}})
	wantCode(t, err, 115, "german")
}
