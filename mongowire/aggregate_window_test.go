package mongowire_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// $setWindowFields and $graphLookup through the Go driver: the stages run
// on the server over the collections of the database.
func TestWindowAndGraphLookupStages(t *testing.T) {
	t.Parallel()
	_, client := setup(t)
	db := client.Database("agg")
	ctx := t.Context()
	sales := db.Collection("sales")
	if _, err := sales.InsertMany(ctx, extDocs(t,
		`{"_id": 1, "state": "CA", "q": 10}`, `{"_id": 2, "state": "CA", "q": 30}`,
		`{"_id": 3, "state": "WA", "q": 20}`, `{"_id": 4, "state": "CA", "q": 20}`)); err != nil {
		t.Fatal(err)
	}
	got := aggregateJSON(t, sales, `[
		{"$setWindowFields": {"partitionBy": "$state", "sortBy": {"q": 1}, "output": {
			"run": {"$sum": "$q", "window": {"documents": ["unbounded", "current"]}},
			"rank": {"$rank": {}}}}},
		{"$project": {"run": 1, "rank": 1}}]`)
	want := `{"_id":1,"run":10,"rank":1} {"_id":4,"run":30,"rank":2} {"_id":2,"run":60,"rank":3} {"_id":3,"run":20,"rank":1}`
	if got != want {
		t.Errorf("$setWindowFields:\ngot  %s\nwant %s", got, want)
	}

	emp := db.Collection("emp")
	if _, err := emp.InsertMany(ctx, extDocs(t,
		`{"_id": 1, "name": "Dev"}`, `{"_id": 2, "name": "Eliot", "boss": "Dev"}`, `{"_id": 3, "name": "Ron", "boss": "Eliot"}`)); err != nil {
		t.Fatal(err)
	}
	got = aggregateJSON(t, emp, `[{"$match": {"_id": 3}},
		{"$graphLookup": {"from": "emp", "startWith": "$boss", "connectFromField": "boss", "connectToField": "name", "as": "chain", "depthField": "d"}},
		{"$project": {"chain": {"$map": {"input": "$chain", "in": ["$$this.name", "$$this.d", {"$type": "$$this.d"}]}}}}]`)
	want = `{"_id":3,"chain":[["Eliot",0,"long"],["Dev",1,"long"]]}`
	if got != want {
		t.Errorf("$graphLookup:\ngot  %s\nwant %s", got, want)
	}

	_, err := sales.Aggregate(ctx, extDocs(t, `{"$setWindowFields": {"output": {"r": {"$rank": {}}}}}`))
	wantCode(t, err, 5371602, "$rank must be specified with a top level sortBy expression with exactly one element")
	_, err = emp.Aggregate(ctx, extDocs(t, `{"$graphLookup": {"from": "emp"}}`))
	wantCode(t, err, 40105, "$graphLookup requires 'startWith'")
}

// extDocs parses documents written as relaxed extended JSON.
func extDocs(t *testing.T, ss ...string) []any {
	t.Helper()
	out := make([]any, len(ss))
	for i, s := range ss {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			t.Fatalf("parse %s: %v", s, err)
		}
		out[i] = d
	}
	return out
}

// aggregateJSON runs a pipeline written as extended JSON and returns its
// documents as relaxed extended JSON, separated by spaces.
func aggregateJSON(t *testing.T, c *mongo.Collection, pipeline string) string {
	t.Helper()
	var p bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"p": `+pipeline+`}`), false, &p); err != nil {
		t.Fatalf("parse %s: %v", pipeline, err)
	}
	vals, err := p.Lookup("p").Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	var stages bson.A
	for _, v := range vals {
		stages = append(stages, v.Document())
	}
	cur, err := c.Aggregate(t.Context(), stages)
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		b, err := bson.MarshalExtJSON(d, false, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return strings.Join(out, " ")
}

// An unknown stage in an update pipeline fails the whole update command,
// as mongod's lite parse does, so no statement of the batch runs.
func TestUpdatePipelineUnknownStageFailsCommand(t *testing.T) {
	t.Parallel()
	_, client := setup(t)
	db := client.Database("agg")
	if _, err := db.Collection("u").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	err := db.RunCommand(t.Context(), bson.D{{Key: "update", Value: "u"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.A{bson.D{{Key: "$invalidOperator", Value: true}}}}},
	}}}).Err()
	wantCode(t, err, 40324, "Unrecognized pipeline stage name: '$invalidOperator'")
	var got bson.M
	if err := db.Collection("u").FindOne(t.Context(), bson.D{}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got["x"] != int32(1) {
		t.Errorf("x = %v after a failed command, want 1 (no statement runs)", got["x"])
	}
}
