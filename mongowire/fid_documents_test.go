package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// $documents feeds a collectionless pipeline with documents of its own;
// elsewhere it is refused.
func TestDocumentsStage(t *testing.T) {
	_, c := setup(t)
	db := c.Database("docs")
	if _, err := db.Collection("other").InsertOne(t.Context(), bson.D{{Key: "k", Value: 2}, {Key: "name", Value: "two"}}); err != nil {
		t.Fatal(err)
	}
	cur, err := db.Aggregate(t.Context(), mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "k", Value: 1}}, bson.D{{Key: "k", Value: 2}}, bson.D{{Key: "k", Value: 3}}}}},
		{{Key: "$match", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 2}}}}}},
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "other"}, {Key: "localField", Value: "k"}, {Key: "foreignField", Value: "k"}, {Key: "as", Value: "o"}}}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "k", Value: 1}, {Key: "n", Value: bson.D{{Key: "$size", Value: "$o"}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(t.Context(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0]["k"] != int32(2) || got[0]["n"] != int32(1) || got[1]["n"] != int32(0) {
		t.Fatalf("$documents pipeline = %v", got)
	}
	for name, tc := range map[string]struct {
		cmd  bson.D
		code int32
		msg  string
	}{
		"on a collection": {bson.D{{Key: "aggregate", Value: "other"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$documents", Value: bson.A{}}}}}, {Key: "cursor", Value: bson.D{}}}, 73, "$documents can only be run with {aggregate: 1}"},
		"not first":       {bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$documents", Value: bson.A{}}}}}, {Key: "cursor", Value: bson.D{}}}, 40602, "$documents is only valid as the first stage in a pipeline"},
		"not an array":    {bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$documents", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}, 5858203, "an array is expected"},
		"not documents":   {bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$documents", Value: bson.A{1}}}}}, {Key: "cursor", Value: bson.D{}}}, 40228, "must evaluate to an object"},
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, db.RunCommand(t.Context(), tc.cmd).Err(), tc.code, tc.msg)
		})
	}
}
