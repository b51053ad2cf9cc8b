package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

type oplogEntry struct {
	Op   string         `bson:"op"`
	NS   string         `bson:"ns"`
	TS   bson.Timestamp `bson:"ts"`
	O    bson.Raw       `bson:"o"`
	O2   bson.Raw       `bson:"o2"`
	Wall bson.DateTime  `bson:"wall"`
}

func oplogFind(t *testing.T, c *mongo.Client, filter any, opts *options.FindOptionsBuilder) []oplogEntry {
	t.Helper()
	cur, err := c.Database("local").Collection("oplog.rs").Find(t.Context(), filter, opts)
	if err != nil {
		t.Fatalf("find on local.oplog.rs: %v", err)
	}
	var out []oplogEntry
	if err := cur.All(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOplogFind reads the oplog window the way tools do on mongod: the
// first and last entries by $natural, and entries after a ts.
func TestOplogFind(t *testing.T) {
	_, c := setup(t)
	coll := c.Database("app").Collection("things")
	for i := range 5 {
		if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := coll.UpdateOne(t.Context(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(t.Context(), bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}

	all := oplogFind(t, c, bson.D{}, nil)
	if len(all) < 7 { // a create, five inserts, an update, a delete
		t.Fatalf("%d oplog entries, want at least 7: %+v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if !all[i-1].TS.Before(all[i].TS) {
			t.Fatalf("entry %d ts %v is not after %v", i, all[i].TS, all[i-1].TS)
		}
	}
	ops := ""
	for _, e := range all {
		ops += e.Op
	}
	if ops != "ciiiiiud" {
		t.Errorf("ops = %q, want ciiiiiud (create, inserts, update, delete)", ops)
	}
	if all[0].NS != "app.$cmd" || all[1].NS != "app.things" || all[6].O2 == nil || all[1].Wall == 0 {
		t.Errorf("entries not in mongod's shape: %+v", all[:7])
	}

	first := oplogFind(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}).SetLimit(1))
	last := oplogFind(t, c, bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: -1}}).SetLimit(1))
	if len(first) != 1 || first[0].TS != all[0].TS {
		t.Errorf("first by $natural = %+v, want ts %v", first, all[0].TS)
	}
	if len(last) != 1 || last[0].TS != all[len(all)-1].TS || last[0].Op != "d" {
		t.Errorf("last by $natural = %+v, want the delete at %v", last, all[len(all)-1].TS)
	}

	mid := all[3].TS
	after := oplogFind(t, c, bson.D{{Key: "ts", Value: bson.D{{Key: "$gt", Value: mid}}}}, nil)
	if len(after) != len(all)-4 || after[0].TS != all[4].TS {
		t.Errorf("ts > %v: %d entries from %v, want %d from %v", mid, len(after), after, len(all)-4, all[4].TS)
	}
	gte := oplogFind(t, c, bson.D{{Key: "ts", Value: bson.D{{Key: "$gte", Value: mid}, {Key: "$lte", Value: all[5].TS}}}}, nil)
	if len(gte) != 3 || gte[0].TS != mid {
		t.Errorf("%v <= ts <= %v: %+v, want 3 entries", mid, all[5].TS, gte)
	}
	back := oplogFind(t, c, bson.D{{Key: "ts", Value: bson.D{{Key: "$lt", Value: mid}}}}, options.Find().SetSort(bson.D{{Key: "ts", Value: -1}}).SetLimit(2))
	if len(back) != 2 || back[0].TS != all[2].TS || back[1].TS != all[1].TS {
		t.Errorf("ts < %v descending, limit 2: %+v, want %v then %v", mid, back, all[2].TS, all[1].TS)
	}
	inserts := oplogFind(t, c, bson.D{{Key: "op", Value: "i"}, {Key: "o._id", Value: bson.D{{Key: "$gte", Value: 3}}}}, nil)
	if len(inserts) != 2 {
		t.Errorf("inserts of _id >= 3: %+v, want 2", inserts)
	}
}

// TestOplogReadOnly: writes, DDL and the reads this server does not answer
// on local.oplog.rs are refused, never silently applied to an empty
// collection.
func TestOplogReadOnly(t *testing.T) {
	_, c := setup(t)
	oplog := c.Database("local").Collection("oplog.rs")
	_, err := oplog.InsertOne(t.Context(), bson.D{{Key: "op", Value: "n"}})
	wantCode(t, err, mongoerr.InvalidNamespace, "cannot write to 'local.oplog.rs'")
	_, err = oplog.DeleteMany(t.Context(), bson.D{})
	wantCode(t, err, mongoerr.InvalidNamespace, "cannot write to 'local.oplog.rs'")
	wantCode(t, oplog.Drop(t.Context()), mongoerr.IllegalOperation, "read-only")
	_, err = oplog.CountDocuments(t.Context(), bson.D{})
	wantCode(t, err, mongoerr.IllegalOperation, "read the oplog with find")
	_, err = oplog.Find(t.Context(), bson.D{}, options.Find().SetSort(bson.D{{Key: "op", Value: 1}}))
	wantCode(t, err, mongoerr.BadValue, "sorted only by $natural or ts")
	_, err = oplog.Find(t.Context(), bson.D{}, options.Find().SetCursorType(options.TailableAwait).SetSort(bson.D{{Key: "$natural", Value: -1}}))
	wantCode(t, err, mongoerr.BadValue, "cannot use tailable option with a sort other than {$natural: 1}")
}

// TestOplogPrivilege: reading the oplog needs find on local, which read on
// another database, or readAnyDatabase, does not grant.
func TestOplogPrivilege(t *testing.T) {
	s := startAuth(t, func(c *mongowire.Config) {})
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "admin", "app", "app-pw", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "app"}})
	createUser(t, root, "admin", "any", "any-pw", "readAnyDatabase")
	createUser(t, root, "admin", "tail", "tail-pw", bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "local"}})
	if _, err := root.Database("app").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"app", "any"} {
		c := mustConnectAs(t, s, user, user+"-pw", "admin", "")
		_, err := c.Database("local").Collection("oplog.rs").Find(t.Context(), bson.D{})
		wantCode(t, err, mongoerr.Unauthorized, "not authorized on local")
	}
	c := mustConnectAs(t, s, "tail", "tail-pw", "admin", "")
	if got := oplogFind(t, c, bson.D{}, nil); len(got) == 0 {
		t.Fatal("read@local found no oplog entries")
	}
}
