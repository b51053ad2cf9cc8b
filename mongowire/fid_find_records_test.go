package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// find's returnKey gives the index key of each document (nothing after a
// collection scan), and showRecordId appends $recordId (not under returnKey).
func TestFindReturnKeyShowRecordID(t *testing.T) {
	_, c := setup(t)
	db := c.Database("rk")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(t.Context(), []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 10}, {Key: "b", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 20}, {Key: "b", Value: "y"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	batch := func(cmd bson.D) []bson.Raw {
		t.Helper()
		vals, _ := run(t, db, cmd).Lookup("cursor", "firstBatch").Array().Values()
		out := make([]bson.Raw, len(vals))
		for i, v := range vals {
			out[i] = v.Document()
		}
		return out
	}
	byA := bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 10}}}}
	got := batch(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: byA}, {Key: "returnKey", Value: true}, {Key: "projection", Value: bson.D{{Key: "b", Value: 1}}}})
	if len(got) != 2 || got[0].String() != `{"a": {"$numberInt":"10"}}` || got[1].String() != `{"a": {"$numberInt":"20"}}` {
		t.Fatalf("returnKey through the a index = %v", got)
	}
	got = batch(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "b", Value: "x"}}}, {Key: "returnKey", Value: true}})
	if len(got) != 1 || got[0].String() != `{}` {
		t.Fatalf("returnKey after a collection scan = %v, want [{}]", got)
	}
	got = batch(bson.D{{Key: "find", Value: "c"}, {Key: "showRecordId", Value: true}, {Key: "projection", Value: bson.D{{Key: "b", Value: 1}}}})
	if len(got) != 2 {
		t.Fatalf("showRecordId = %v", got)
	}
	r0, ok0 := got[0].Lookup("$recordId").Int64OK()
	r1, ok1 := got[1].Lookup("$recordId").Int64OK()
	if !ok0 || !ok1 || r0 <= 0 || r1 <= r0 || got[0].Lookup("a").Type != 0 || got[0].Lookup("b").StringValue() != "x" {
		t.Fatalf("showRecordId with a projection = %v", got)
	}
	got = batch(bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: byA}, {Key: "returnKey", Value: true}, {Key: "showRecordId", Value: true}, {Key: "limit", Value: 1}})
	// returnKey drops the record id, as mongod's ReturnKeyStage does.
	if _, err := got[0].LookupErr("$recordId"); len(got) != 1 || got[0].Lookup("a").Int32() != 10 || err == nil {
		t.Fatalf("returnKey and showRecordId = %v, want the index key alone", got)
	}
}
