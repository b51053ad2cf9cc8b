package mongowire_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

func TestTTLMonitorExpiresDocuments(t *testing.T) {
	_, c := setup(t, func(cfg *mongowire.Config) { cfg.TTLMonitorInterval = 50 * time.Millisecond })
	ctx := t.Context()
	coll := c.Database("ttl").Collection("sessions")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(60)}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	now := time.Now()
	docs := []any{
		bson.D{{Key: "_id", Value: "old"}, {Key: "at", Value: now.Add(-time.Hour)}},
		bson.D{{Key: "_id", Value: "fresh"}, {Key: "at", Value: now}},
		bson.D{{Key: "_id", Value: "future"}, {Key: "at", Value: now.Add(time.Hour)}},
		bson.D{{Key: "_id", Value: "string"}, {Key: "at", Value: "2000-01-01"}},
		bson.D{{Key: "_id", Value: "timestamp"}, {Key: "at", Value: bson.Timestamp{T: 1}}},
		bson.D{{Key: "_id", Value: "missing"}},
		bson.D{{Key: "_id", Value: "array"}, {Key: "at", Value: bson.A{now.Add(time.Hour), now.Add(-2 * time.Hour)}}},
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d documents left, want 5 (old and array expired)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range []string{"old", "array"} {
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err(); err != mongo.ErrNoDocuments {
			t.Errorf("%s: %v, want it expired", id, err)
		}
	}
	// The deletes reach change streams as ordinary deletes, after the inserts.
	deleted := map[string]bool{}
	for len(deleted) < 2 && cs.Next(ctx) {
		var ev struct {
			OperationType string `bson:"operationType"`
			DocumentKey   struct {
				ID string `bson:"_id"`
			} `bson:"documentKey"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.OperationType == "delete" {
			deleted[ev.DocumentKey.ID] = true
		}
	}
	if !deleted["old"] || !deleted["array"] {
		t.Fatalf("change stream deletes = %v, want old and array", deleted)
	}
	// The oplog shows them too.
	var entry bson.M
	if err := c.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: "ttl.sessions"}}).Decode(&entry); err != nil {
		t.Fatalf("oplog delete of a TTL expiry: %v", err)
	}
}

func TestTTLIndexSpecRefused(t *testing.T) {
	_, c := setup(t)
	db := c.Database("ttl")
	for _, tc := range []struct {
		name  string
		index bson.D
		code  int32
		msg   string
	}{
		{"negative", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "expireAfterSeconds", Value: -1}}, 67, "acceptable range"},
		{"string", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "expireAfterSeconds", Value: "10"}}, 67, "must be numeric"},
		{"compound", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "ab"}, {Key: "expireAfterSeconds", Value: 10}}, 67, "single-field"},
		{"_id", bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "id"}, {Key: "expireAfterSeconds", Value: 10}}, 197, "_id index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := db.RunCommand(t.Context(), bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{tc.index}}}).Err()
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestCollModIndexExpireAfterSeconds(t *testing.T) {
	_, c := setup(t, func(cfg *mongowire.Config) { cfg.TTLMonitorInterval = 50 * time.Millisecond })
	ctx := t.Context()
	db := c.Database("ttl")
	coll := db.Collection("m")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(7200)}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "at", Value: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("expired before its time: %d left", n)
	}
	r := run(t, db, bson.D{{Key: "collMod", Value: "m"}, {Key: "index", Value: bson.D{{Key: "keyPattern", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "expireAfterSeconds", Value: 60}}}})
	if r.Lookup("expireAfterSeconds_old").AsInt64() != 7200 || r.Lookup("expireAfterSeconds_new").AsInt64() != 60 {
		t.Fatalf("collMod reply = %v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := coll.CountDocuments(ctx, bson.D{}); n != 0; n, _ = coll.CountDocuments(ctx, bson.D{}) {
		if time.Now().After(deadline) {
			t.Fatal("not expired after collMod lowered expireAfterSeconds")
		}
		time.Sleep(20 * time.Millisecond)
	}
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 || specs[1].ExpireAfterSeconds == nil || *specs[1].ExpireAfterSeconds != 60 {
		t.Fatalf("listIndexes after collMod: %+v %v", specs, err)
	}
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "m"}, {Key: "index", Value: bson.D{{Key: "name", Value: "nope"}, {Key: "expireAfterSeconds", Value: 1}}}}).Err(), 27, "cannot find index")
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "m"}, {Key: "index", Value: bson.D{{Key: "name", Value: "at_1"}}}}).Err(), 72, "no expireAfterSeconds")
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "m"}, {Key: "index", Value: bson.D{{Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: -5}}}}).Err(), 72, "acceptable range")
}
