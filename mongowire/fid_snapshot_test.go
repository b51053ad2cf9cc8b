package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A snapshot session reads every collection as of the cluster time of its
// first read, through find, aggregate and distinct, while writes go on.
func TestSnapshotSession(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("snap").Collection("c")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "a"}}, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	sess, err := c.StartSession(options.Session().SetSnapshot(true))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	count := func() int {
		t.Helper()
		cur, err := coll.Find(sctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(sctx, &docs); err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}
	if n := count(); n != 2 {
		t.Fatalf("first snapshot read: %d documents, want 2", n)
	}
	// Writes after the snapshot's time are not seen by the session.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "z"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("later snapshot read: %d documents, want the 2 of the snapshot", n)
	}
	vals, err := coll.Distinct(sctx, "v", bson.D{}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if got := vals.String(); got != `{"0": "a","1": "b"}` && got != `["a","b"]` {
		t.Fatalf("distinct in the snapshot = %s, want [a b]", got)
	}
	cur, err := coll.Aggregate(sctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "vs", Value: bson.D{{Key: "$push", Value: "$v"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var groups []bson.M
	if err := cur.All(sctx, &groups); err != nil || len(groups) != 1 || len(groups[0]["vs"].(bson.A)) != 2 || groups[0]["vs"].(bson.A)[0] != "a" {
		t.Fatalf("aggregate in the snapshot = %v, %v", groups, err)
	}
	// Outside the session the writes are there.
	if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "v", Value: "z"}}); n != 1 {
		t.Fatalf("current data: %d documents with v z, want 1", n)
	}
	// A write in a snapshot session is refused by the server.
	_, err = coll.InsertOne(sctx, bson.D{{Key: "x", Value: 1}})
	wantCode(t, err, 72, "Command insert does not support")
}

// readConcern as mongod checks it: atClusterTime read back in the cursor,
// times in the future or before the history refused, unknown levels and
// fields refused, $out under linearizable refused.
func TestReadConcern(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("rc")
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	reply := run(t, db, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}})
	tt, ti, ok := reply.Lookup("cursor", "atClusterTime").TimestampOK()
	if !ok {
		t.Fatalf("no cursor.atClusterTime in %s", reply)
	}
	at := bson.Timestamp{T: tt, I: ti}
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	reply = run(t, db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: at}}}})
	if docs, _ := reply.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 1 {
		t.Fatalf("aggregate at %v: %s, want the one document then", at, reply)
	}
	if gt, gi, _ := reply.Lookup("cursor", "atClusterTime").TimestampOK(); (bson.Timestamp{T: gt, I: gi}) != at {
		t.Fatalf("aggregate cursor atClusterTime = %v, want %v", reply.Lookup("cursor", "atClusterTime"), at)
	}
	// Plain reads answer no atClusterTime.
	if v := run(t, db, bson.D{{Key: "find", Value: "c"}}).Lookup("cursor", "atClusterTime"); v.Type != 0 {
		t.Fatalf("a local read answered atClusterTime %v", v)
	}
	future := bson.Timestamp{T: at.T + 3600, I: 1}
	for name, tc := range map[string]struct {
		cmd  bson.D
		code int32
		msg  string
	}{
		"unknown level": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "eventual"}}}}, 2,
			"Enumeration value 'eventual' for field 'readConcern.level' is not a valid value."},
		"unknown field": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "lvl", Value: "local"}}}}, 40415,
			"BSON field 'readConcern.lvl' is an unknown field."},
		"future": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: future}}}}, 72,
			"readConcern atClusterTime value must not be greater than the current clusterTime"},
		"future after": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: future}}}}, 72,
			"readConcern afterClusterTime value must not be greater than the current clusterTime"},
		"too old": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}, {Key: "atClusterTime", Value: bson.Timestamp{T: 1, I: 1}}}}}, 239,
			"Read timestamp Timestamp(1, 1) is older than the oldest available timestamp."},
		"at without snapshot": {bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}, {Key: "atClusterTime", Value: at}}}}, 72,
			"atClusterTime field can be set only if level is equal to snapshot"},
		"count under snapshot": {bson.D{{Key: "count", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}}, 72,
			"Command count does not support"},
		"out linearizable": {bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "o"}}}}, {Key: "cursor", Value: bson.D{}},
			{Key: "readConcern", Value: bson.D{{Key: "level", Value: "linearizable"}}}}, 72, "$out cannot be used with a 'linearizable' read concern level"},
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, db.RunCommand(ctx, tc.cmd).Err(), tc.code, tc.msg)
		})
	}
	// The other levels read as local does.
	for _, level := range []string{"local", "majority", "available", "linearizable"} {
		r := run(t, db, bson.D{{Key: "find", Value: "c"}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: level}}}})
		if docs, _ := r.Lookup("cursor", "firstBatch").Array().Values(); len(docs) != 2 {
			t.Errorf("level %s: %s", level, r)
		}
	}
}
