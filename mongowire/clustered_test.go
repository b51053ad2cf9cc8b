package mongowire_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

func TestClusteredIndexListed(t *testing.T) {
	_, c := setup(t, func(cfg *mongowire.Config) { cfg.TTLMonitorInterval = 50 * time.Millisecond })
	ctx := t.Context()
	db := c.Database("cl")
	run(t, db, bson.D{{Key: "create", Value: "c"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}, {Key: "name", Value: "byId"}}}})
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "c"}})
	if err != nil || len(specs) != 1 {
		t.Fatalf("listCollections: %v %v", specs, err)
	}
	ci, err := specs[0].Options.LookupErr("clusteredIndex")
	if err != nil {
		t.Fatalf("options = %v, want clusteredIndex", specs[0].Options)
	}
	if ci.Document().Lookup("v").AsInt64() != 2 || ci.Document().Lookup("name").StringValue() != "byId" || !ci.Document().Lookup("unique").Boolean() {
		t.Fatalf("clusteredIndex = %v, want {v: 2, key: {_id: 1}, name: byId, unique: true}", ci)
	}
	raw := run(t, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "c"}}}})
	if _, err := raw.LookupErr("cursor", "firstBatch", "0", "idIndex"); err == nil {
		t.Fatalf("a clustered collection lists an idIndex: %v", raw)
	}
	cur, err := db.Collection("c").Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var idx []bson.M
	if err := cur.All(ctx, &idx); err != nil || len(idx) != 1 {
		t.Fatalf("listIndexes: %v %v", idx, err)
	}
	if idx[0]["name"] != "byId" || idx[0]["clustered"] != true || idx[0]["unique"] != true {
		t.Fatalf("listIndexes = %v, want the clustered _id index", idx[0])
	}

	// A clustered collection with expireAfterSeconds expires by _id dates.
	if err := db.CreateCollection(ctx, "ttl", options.CreateCollection().
		SetClusteredIndex(bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: true}}).SetExpireAfterSeconds(60)); err != nil {
		t.Fatal(err)
	}
	ttl := db.Collection("ttl")
	if _, err := ttl.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: time.Now().Add(-time.Hour)}}, bson.D{{Key: "_id", Value: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := ttl.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d documents, want the old one expired", n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32
		msg  string
	}{
		{"not unique", bson.D{{Key: "create", Value: "x"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "unique", Value: false}}}}, 72, "requires unique: true"},
		{"other key", bson.D{{Key: "create", Value: "x"}, {Key: "clusteredIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "unique", Value: true}}}}, 72, "only supported for key: {_id: 1}"},
		{"ttl without clustering", bson.D{{Key: "create", Value: "x"}, {Key: "expireAfterSeconds", Value: 10}}, 72, "requires clustering"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, db.RunCommand(ctx, tc.cmd).Err(), tc.code, tc.msg)
		})
	}
}
