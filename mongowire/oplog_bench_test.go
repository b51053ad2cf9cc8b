package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
)

// BenchmarkOplogWindow: what the MongoDB source's headroom poll costs, the
// first and the last entry of local.oplog.rs by $natural, on an oplog of
// 50k entries; and a ts-bounded find of 100 entries in its middle.
func BenchmarkOplogWindow(b *testing.B) {
	s := testenv.MongoWire(b)
	c := testenv.MongoClient(b, s.URI())
	coll := c.Database("app").Collection("events")
	docs := make([]any, 1000)
	for n := range 50 {
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: n*1000 + i}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}}
		}
		if _, err := coll.InsertMany(b.Context(), docs); err != nil {
			b.Fatal(err)
		}
	}
	oplog := c.Database("local").Collection("oplog.rs")
	var mid struct {
		TS bson.Timestamp `bson:"ts"`
	}
	if err := oplog.FindOne(b.Context(), bson.D{{Key: "o._id", Value: 25000}}).Decode(&mid); err != nil {
		b.Fatal(err)
	}
	b.Run("first_and_last", func(b *testing.B) {
		for b.Loop() {
			for _, dir := range []int{1, -1} {
				var e struct {
					TS bson.Timestamp `bson:"ts"`
				}
				err := oplog.FindOne(b.Context(), bson.D{}, options.FindOne().SetSort(bson.D{{Key: "$natural", Value: dir}}).
					SetProjection(bson.D{{Key: "ts", Value: 1}})).Decode(&e)
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("ts_range_100", func(b *testing.B) {
		for b.Loop() {
			cur, err := oplog.Find(b.Context(), bson.D{{Key: "ts", Value: bson.D{{Key: "$gt", Value: mid.TS}}}}, options.Find().SetLimit(100))
			if err != nil {
				b.Fatal(err)
			}
			var out []bson.Raw
			if err := cur.All(b.Context(), &out); err != nil || len(out) != 100 {
				b.Fatalf("%d entries, %v", len(out), err)
			}
		}
	})
}
