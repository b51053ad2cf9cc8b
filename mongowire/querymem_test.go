package mongowire_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func aggregate(t *testing.T, coll *mongo.Collection, pipeline any, opts ...options.Lister[options.AggregateOptions]) ([]bson.Raw, error) {
	t.Helper()
	cur, err := coll.Aggregate(t.Context(), pipeline, opts...)
	if err != nil {
		return nil, err
	}
	var out []bson.Raw
	for cur.Next(t.Context()) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	return out, cur.Err()
}

// No reply carries a document over 16 MiB: 10334 BSONObjectTooLarge,
// from aggregate and find alike.
func TestResultDocumentOver16MB(t *testing.T) {
	_, client := setup(t)
	coll := client.Database("mem").Collection("big")
	mb := strings.Repeat("b", 1<<20)
	docs := make([]any, 17)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "s", Value: mb}, {Key: "a", Value: bson.A{1, 2}}}
	}
	if _, err := coll.InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	_, err := aggregate(t, coll, bson.A{
		bson.D{{Key: "$unwind", Value: "$a"}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}},
	})
	wantCode(t, err, 10334, "BSONObj size")

	err = coll.FindOne(t.Context(), bson.D{{Key: "_id", Value: 0}}, options.FindOne().SetProjection(bson.D{
		{Key: "s", Value: bson.D{{Key: "$concatArrays", Value: bson.A{
			bson.A{"$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s"}, bson.A{"$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s"},
		}}}},
	})).Err()
	wantCode(t, err, 10334, "BSONObj size")
}
