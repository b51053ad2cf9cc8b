package mongowire_test

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// TestHashBSONElement: mongod's hash, checked against the values its own
// test of _hashBSONElement hard-codes (jstests/core/hashing/
// hash_bson_element.js, seed 1), which must never change.
func TestHashBSONElement(t *testing.T) {
	_, c := setup(t, func(cfg *mongowire.Config) { cfg.EnableTestCommands = true })
	maxLong, lowestLong, zeroLong := int64(1136124329541638701), int64(5744114172487291558), int64(5574369198691456941)
	tests := map[string]struct {
		key  any
		want int64
	}{
		"string":                    {"hashthis", 6271151123721111923},
		"2^63":                      {math.Pow(2, 63), lowestLong},
		"past 2^63":                 {math.Pow(2, 63) + math.Pow(2, 11), maxLong},
		"2^500":                     {math.Pow(2, 500), maxLong},
		"+Inf":                      {math.Inf(1), maxLong},
		"just under 2^63":           {math.Pow(2, 63) - math.Pow(2, 10), -3954856262017896439},
		"-2^63":                     {-math.Pow(2, 63), lowestLong},
		"just above -2^63":          {-(math.Pow(2, 63) - math.Pow(2, 10)), -1762411739488908479},
		"below -2^63":               {-(math.Pow(2, 63) + math.Pow(2, 11)), lowestLong},
		"-Inf":                      {math.Inf(-1), lowestLong},
		"zero":                      {0.0, zeroLong},
		"NumberLong zero":           {int64(0), zeroLong},
		"NaN":                       {math.NaN(), zeroLong},
		"object":                    {bson.D{{Key: "a", Value: 1.0}, {Key: "b", Value: 2.0}}, -7076810813311352857},
		"object with corner values": {bson.D{{Key: "a", Value: math.Pow(2, 63)}, {Key: "b", Value: math.NaN()}}, 1223292051903137684},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := c.Database("admin").RunCommand(t.Context(), bson.D{{Key: "_hashBSONElement", Value: tt.key}, {Key: "seed", Value: 1}}).Raw()
			if err != nil {
				t.Fatal(err)
			}
			if got := raw.Lookup("out").Int64(); got != tt.want {
				t.Errorf("hash %d, want %d", got, tt.want)
			}
		})
	}
}

// TestHashedIndex: a hashed index answers equality and $in, holds
// mongod's hashes (seed 0), and refuses arrays and uniqueness as mongod.
func TestHashedIndex(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("hx")
	coll := db.Collection("h")
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: "hashed"}}})
	if err != nil || name != "a_hashed" {
		t.Fatalf("create: %q, %v", name, err)
	}
	for i := range 100 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	explain := func(filter bson.D) string {
		raw := run(t, db, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "h"}, {Key: "filter", Value: filter}}}})
		in, err := raw.LookupErr("queryPlanner", "winningPlan", "inputStage", "indexName")
		if err != nil {
			return "COLLSCAN"
		}
		return in.StringValue()
	}
	if got := explain(bson.D{{Key: "a", Value: 42}}); got != "a_hashed" {
		t.Errorf("equality used %s, want a_hashed", got)
	}
	if got := explain(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 42}}}}); got != "COLLSCAN" {
		t.Errorf("a range used %s, want a collection scan", got)
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{3, 4.0, int64(5), 500}}}}})
	wantIDs(t, "$in through the hashed index", idsOf(t, cur, err), 3, 4, 5)
	cur, err = coll.Find(ctx, bson.D{{Key: "a", Value: 7.5}})
	wantIDs(t, "7.5 hashes as 7 but does not match it", idsOf(t, cur, err))

	_, err = coll.InsertOne(ctx, bson.D{{Key: "a", Value: bson.A{1, 2}}})
	wantCode(t, err, 16766, "hashed indexes do not currently support array values")
	_, err = db.Collection("u").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: "hashed"}}, Options: options.Index().SetUnique(true)})
	wantCode(t, err, 67, "cannot guarantee uniqueness")
}
