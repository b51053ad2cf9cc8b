package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// An upsert whose filter has no equality field inserts the update's own
// fields, as mongod does, instead of failing.
func TestUpsertWithoutEquality(t *testing.T) {
	_, c := setup(t)
	coll := c.Database("ups").Collection("c")
	for name, filter := range map[string]bson.D{
		"empty": {},
		"range": {{Key: "n", Value: bson.D{{Key: "$gt", Value: 5}}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := coll.Drop(t.Context()); err != nil {
				t.Fatal(err)
			}
			res, err := coll.UpdateOne(t.Context(), filter, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			if err != nil {
				t.Fatal(err)
			}
			if res.UpsertedID == nil {
				t.Fatalf("nothing upserted: %+v", res)
			}
			var got bson.M
			if err := coll.FindOne(t.Context(), bson.D{}).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got["x"] != int32(1) || len(got) != 2 {
				t.Fatalf("upserted %v, want {_id, x: 1}", got)
			}
			// Replacement and findAndModify take the same path.
			if _, err := coll.ReplaceOne(t.Context(), bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 10}}}}, bson.D{{Key: "y", Value: 2}}, options.Replace().SetUpsert(true)); err != nil {
				t.Fatal(err)
			}
			r := coll.FindOneAndUpdate(t.Context(), bson.D{{Key: "z", Value: bson.D{{Key: "$exists", Value: true}}}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "z", Value: 1}}}}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After))
			if err := r.Decode(&got); err != nil || got["z"] != int32(1) {
				t.Fatalf("findAndModify upsert = %v, %v", got, err)
			}
			if n, _ := coll.CountDocuments(t.Context(), bson.D{}); n != 3 {
				t.Fatalf("%d documents, want 3", n)
			}
		})
	}
}
