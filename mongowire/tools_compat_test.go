package mongowire_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// What MongoDB's database tools (mongodump --oplog, mongorestore
// --oplogReplay / --preserveUUID / users, mongostat) and mongosh's
// replication helpers need from the server. tests/tools runs the tools
// themselves when they are available.

// TestApplyOpsReplaysOplog: every entry of one server's local.oplog.rs,
// applied in order with applyOps to a second server, rebuilds the same
// collections (options, UUIDs, indexes) and documents — what
// mongorestore --oplogReplay --preserveUUID relies on.
func TestApplyOpsReplaysOplog(t *testing.T) {
	_, a := setup(t)
	_, b := setup(t)
	ctx := t.Context()
	db := a.Database("rp")
	mustRun := func(cmd bson.D) { run(t, db, cmd) }
	mustRun(bson.D{{Key: "create", Value: "c"}, {Key: "validator", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$exists", Value: true}}}}}})
	c := db.Collection("c")
	for i := range 5 {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "x", Value: i},
			{Key: "arr", Value: bson.A{1, 2, bson.D{{Key: "k", Value: i}}}},
			{Key: "sub", Value: bson.D{{Key: "p", Value: 1}, {Key: "q", Value: bson.D{{Key: "r", Value: 2}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}, Options: options.Index().SetUnique(true).SetName("ux")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "sub.p", Value: -1}},
		Options: options.Index().SetExpireAfterSeconds(100000).SetPartialFilterExpression(bson.D{{Key: "x", Value: bson.D{{Key: "$gt", Value: 0}}}})}); err != nil {
		t.Fatal(err)
	}
	updates := []struct {
		id     int
		update any
	}{
		{0, bson.D{{Key: "$set", Value: bson.D{{Key: "sub.q.r", Value: 3}, {Key: "arr.2.k", Value: "z"}, {Key: "new", Value: 1}}}, {Key: "$unset", Value: bson.D{{Key: "sub.p", Value: ""}}}}},
		{1, bson.D{{Key: "$push", Value: bson.D{{Key: "arr", Value: 9}}}}},
		{2, bson.D{{Key: "$pop", Value: bson.D{{Key: "arr", Value: 1}}}}},
		{3, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "arr", Value: bson.A{7}}}}}}},
		{3, bson.D{{Key: "$set", Value: bson.D{{Key: "arr.4", Value: "pad"}}}}},
	}
	for _, u := range updates {
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.id}}, u.update); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 4}}, bson.D{{Key: "x", Value: 40}, {Key: "only", Value: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	mustRun(bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}, {Key: "max", Value: 3}})
	for i := range 5 {
		if _, err := db.Collection("capped").InsertOne(ctx, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(bson.D{{Key: "create", Value: "v"}, {Key: "viewOn", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "x", Value: 0}}}}}}})
	if err := c.Indexes().DropOne(ctx, "ux"); err != nil {
		t.Fatal(err)
	}
	mustRun(bson.D{{Key: "collMod", Value: "c"}, {Key: "validationLevel", Value: "moderate"}})
	run(t, a.Database("admin"), bson.D{{Key: "renameCollection", Value: "rp.c"}, {Key: "to", Value: "rp.c2"}})
	sess, err := a.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if _, err := db.Collection("c2").InsertOne(sc, bson.D{{Key: "_id", Value: 100}, {Key: "x", Value: 100}}); err != nil {
			return nil, err
		}
		return db.Collection("c2").UpdateOne(sc, bson.D{{Key: "_id", Value: 0}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1000}}}})
	}); err != nil {
		t.Fatal(err)
	}
	sess.EndSession(ctx)
	mustRun(bson.D{{Key: "create", Value: "gone"}})
	mustRun(bson.D{{Key: "drop", Value: "gone"}})
	mustRun(bson.D{{Key: "create", Value: "moved"}})
	if _, err := db.Collection("moved").InsertOne(ctx, bson.D{{Key: "_id", Value: "m"}}); err != nil {
		t.Fatal(err)
	}
	run(t, a.Database("admin"), bson.D{{Key: "renameCollection", Value: "rp.moved"}, {Key: "to", Value: "rp2.there"}})

	cur, err := a.Database("local").Collection("oplog.rs").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var ops []bson.Raw
	if err := cur.All(ctx, &ops); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if err := b.Database("admin").RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{op}}}).Err(); err != nil {
			t.Fatalf("applyOps %s: %v", op, err)
		}
	}
	for _, name := range []string{"rp", "rp2"} {
		if diff := compareServers(t, a, b, name); diff != "" {
			t.Fatal(diff)
		}
	}
	// Inserts replayed again over documents that are there do not fail
	// (they upsert), as mongorestore --oplogReplay needs when the oplog
	// overlaps the dumped data.
	for _, op := range ops {
		if op.Lookup("op").StringValue() != "i" || op.Lookup("ns").StringValue() != "rp.c" {
			continue
		}
		if err := b.Database("admin").RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{op}}}).Err(); err != nil {
			t.Fatalf("applyOps again %s: %v", op, err)
		}
	}
}

// compareServers returns what differs between db on a and on b: the
// collection listings (options and UUIDs), indexes and documents.
func compareServers(t *testing.T, a, b *mongo.Client, db string) string {
	t.Helper()
	list := func(c *mongo.Client) []bson.Raw {
		cur, err := c.Database(db).ListCollections(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(t.Context(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	la, lb := list(a), list(b)
	if len(la) != len(lb) {
		return fmt.Sprintf("collections:\n%v\n%v", la, lb)
	}
	for i := range la {
		if !bytes.Equal(la[i], lb[i]) {
			return fmt.Sprintf("listing:\n%s\n%s", la[i], lb[i])
		}
		name := la[i].Lookup("name").StringValue()
		if la[i].Lookup("type").StringValue() == "view" {
			continue
		}
		for _, what := range []string{"indexes", "documents"} {
			read := func(c *mongo.Client) []string {
				coll := c.Database(db).Collection(name)
				var cur *mongo.Cursor
				var err error
				if what == "indexes" {
					cur, err = coll.Indexes().List(t.Context())
				} else {
					cur, err = coll.Find(t.Context(), bson.D{}, options.Find().SetSort(bson.D{{Key: "$natural", Value: 1}}))
				}
				if err != nil {
					t.Fatal(err)
				}
				var docs []bson.Raw
				if err := cur.All(t.Context(), &docs); err != nil {
					t.Fatal(err)
				}
				out := make([]string, len(docs))
				for j, d := range docs {
					out[j] = d.String()
				}
				return out
			}
			if da, dbb := read(a), read(b); !slices.Equal(da, dbb) {
				return fmt.Sprintf("%s of %s:\n%v\n%v", what, name, da, dbb)
			}
		}
	}
	return ""
}

// TestApplyOpsRefusals: malformed entries fail with mongod's codes and
// name what is wrong; applyOps is no transaction statement.
func TestApplyOpsRefusals(t *testing.T) {
	_, c := setup(t)
	admin := c.Database("admin")
	run(t, c.Database("x"), bson.D{{Key: "create", Value: "c"}})
	for name, tc := range map[string]struct {
		ops  any
		code int32
		msg  string
	}{
		"not an array":   {"x", 14, "'applyOps.applyOps' is the wrong type"},
		"not an object":  {bson.A{1}, 9, "entry 0 is a int"},
		"no op":          {bson.A{bson.D{{Key: "ns", Value: "x.c"}}}, 9, "no 'op' field"},
		"unknown op":     {bson.A{bson.D{{Key: "op", Value: "z"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{}}}}, 2, "'op' \"z\" is not one of"},
		"bad ui":         {bson.A{bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "x.c"}, {Key: "ui", Value: "u"}, {Key: "o", Value: bson.D{{Key: "_id", Value: 1}}}}}, 207, "'ui' is not a UUID"},
		"missing ui":     {bson.A{bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "x.c"}, {Key: "ui", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "o", Value: bson.D{{Key: "_id", Value: 1}}}}}, 26, "missing collection"},
		"insert no _id":  {bson.A{bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{{Key: "a", Value: 1}}}}}, 4, "has no _id"},
		"update no o2":   {bson.A{bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{{Key: "a", Value: 1}}}}}, 9, "no object 'o2'"},
		"bad diff":       {bson.A{bson.D{{Key: "op", Value: "u"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{{Key: "$v", Value: 2}, {Key: "diff", Value: bson.D{{Key: "q", Value: 1}}}}}, {Key: "o2", Value: bson.D{{Key: "_id", Value: 1}}}}}, 9, "unknown section 'q'"},
		"unknown cmd":    {bson.A{bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "x.$cmd"}, {Key: "o", Value: bson.D{{Key: "emptycapped", Value: "c"}}}}}, 115, "\"emptycapped\" is not supported"},
		"failing create": {bson.A{bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "x.$cmd"}, {Key: "o", Value: bson.D{{Key: "create", Value: "d"}, {Key: "capped", Value: true}}}}}, 72, "size"},
	} {
		t.Run(name, func(t *testing.T) {
			err := admin.RunCommand(t.Context(), bson.D{{Key: "applyOps", Value: tc.ops}}).Err()
			wantCode(t, err, tc.code, tc.msg)
		})
	}
	// The entries before a failing one stay applied (mongod would apply
	// an all-CRUD batch atomically; the README says so).
	err := admin.RunCommand(t.Context(), bson.D{{Key: "applyOps", Value: bson.A{
		bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{{Key: "_id", Value: 7}}}},
		bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "x.c"}, {Key: "o", Value: bson.D{{Key: "a", Value: 1}}}},
	}}}).Err()
	wantCode(t, err, 4, "entry 1")
	if n, _ := c.Database("x").Collection("c").CountDocuments(t.Context(), bson.D{{Key: "_id", Value: 7}}); n != 1 {
		t.Fatalf("entry 0 applied %d times, want 1", n)
	}
	// Entries already applied, as a replay that overlaps the dumped data
	// meets them, succeed: mongod's acceptable errors.
	for _, o := range []bson.D{
		{{Key: "create", Value: "c"}},
		{{Key: "drop", Value: "missing"}},
		{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "nope"}},
		{{Key: "renameCollection", Value: "x.missing"}, {Key: "to", Value: "x.other"}},
	} {
		run(t, admin, bson.D{{Key: "applyOps", Value: bson.A{bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "x.$cmd"}, {Key: "o", Value: o}}}}})
	}
	r := run(t, admin, bson.D{{Key: "applyOps", Value: bson.A{bson.D{{Key: "op", Value: "n"}, {Key: "ns", Value: ""}, {Key: "o", Value: bson.D{{Key: "msg", Value: "noop"}}}}}}})
	if r.Lookup("applied").Int32() != 1 {
		t.Fatalf("applyOps of a no-op = %s", r)
	}
}

// TestCreateIdIndex: create takes mongorestore's idIndex, checks it as
// mongod does, and does not list it among the options.
func TestCreateIdIndex(t *testing.T) {
	_, c := setup(t)
	db := c.Database("ii")
	good := bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}, {Key: "ns", Value: "ii.c"}, {Key: "v", Value: 2}}
	run(t, db, bson.D{{Key: "create", Value: "c"}, {Key: "idIndex", Value: good}})
	r := run(t, db, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "c"}}}})
	info := r.Lookup("cursor", "firstBatch", "0").Document()
	if opts := info.Lookup("options").Document(); len(opts) != 5 {
		t.Fatalf("options = %s, want {}", opts)
	}
	if info.Lookup("idIndex", "name").StringValue() != "_id_" {
		t.Fatalf("listing = %s", info)
	}
	for name, tc := range map[string]struct {
		spec bson.D
		more bson.D
		code int32
		msg  string
	}{
		"key":     {bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "_id_"}}, nil, 2, "must be {_id: 1}"},
		"name":    {bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "x"}}, nil, 2, "must be '_id_'"},
		"no name": {bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}}, nil, 9, "'name' field is a required"},
		"unique":  {bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}, {Key: "unique", Value: true}}, nil, 197, "'unique' is not valid for an _id index"},
		"ns":      {bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}, {Key: "ns", Value: "ii.other"}}, nil, 2, "doesn't match the namespace"},
		"version": {bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}, {Key: "v", Value: 3}}, nil, 67, "v=3"},
		"view":    {good, bson.D{{Key: "viewOn", Value: "c"}}, 72, "not allowed with 'viewOn'"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := append(bson.D{{Key: "create", Value: "d"}, {Key: "idIndex", Value: tc.spec}}, tc.more...)
			wantCode(t, db.RunCommand(t.Context(), cmd).Err(), tc.code, tc.msg)
		})
	}
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "create", Value: "d"}, {Key: "idIndex", Value: 1}}).Err(), 14, "'create.idIndex' is the wrong type")
}

// TestLocalAndAdminRendered: local (listed by listDatabases) holds the
// capped oplog.rs with collStats and $collStats, and system.replset;
// admin.system.version holds the auth schema version mongorestore reads.
func TestLocalAndAdminRendered(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	if _, err := c.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	names, err := c.ListDatabaseNames(ctx, bson.D{})
	if err != nil || !slices.Contains(names, "local") || !slices.Contains(names, "app") {
		t.Fatalf("databases = %v, %v", names, err)
	}
	local := c.Database("local")
	colls, err := local.ListCollectionNames(ctx, bson.D{})
	if err != nil || !slices.Equal(colls, []string{"oplog.rs", "system.replset"}) {
		t.Fatalf("local collections = %v, %v", colls, err)
	}
	r := run(t, local, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "oplog.rs"}}}})
	opl := r.Lookup("cursor", "firstBatch", "0").Document()
	if !opl.Lookup("options", "capped").Boolean() || opl.Lookup("options", "size").AsInt64() != 256<<20 {
		t.Fatalf("oplog.rs listing = %s", opl)
	}
	st := run(t, local, bson.D{{Key: "collStats", Value: "oplog.rs"}})
	if !st.Lookup("capped").Boolean() || st.Lookup("maxSize").AsInt64() != 256<<20 || st.Lookup("count").AsInt64() < 2 || st.Lookup("size").AsInt64() <= 0 {
		t.Fatalf("collStats oplog.rs = %s", st)
	}
	cur, err := local.Collection("oplog.rs").Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var agg []bson.Raw
	if err := cur.All(ctx, &agg); err != nil || len(agg) != 1 || agg[0].Lookup("storageStats", "maxSize").AsInt64() != 256<<20 {
		t.Fatalf("$collStats on oplog.rs = %v, %v", agg, err)
	}
	_, err = local.Collection("oplog.rs").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}})
	wantCode(t, err, 20, "read the oplog with find")
	var cfg bson.Raw
	if err := local.Collection("system.replset").FindOne(ctx, bson.D{}).Decode(&cfg); err != nil || cfg.Lookup("_id").StringValue() != "rs0" {
		t.Fatalf("system.replset = %s, %v", cfg, err)
	}
	if n, err := local.Collection("system.replset").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("system.replset count = %d, %v", n, err)
	}
	var auth bson.Raw
	if err := c.Database("admin").Collection("system.version").FindOne(ctx, bson.D{{Key: "_id", Value: "authSchema"}}).Decode(&auth); err != nil || auth.Lookup("currentVersion").Int32() != 5 {
		t.Fatalf("authSchema = %s, %v", auth, err)
	}
	// A find on a rendered collection sorts as any find does.
	for _, dir := range []int{1, -1} {
		cur, err := c.Database("admin").Collection("system.version").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: dir}}))
		if err != nil {
			t.Fatal(err)
		}
		var vs []bson.Raw
		if err := cur.All(ctx, &vs); err != nil || len(vs) < 2 {
			t.Fatalf("system.version: %v %v", vs, err)
		}
		first, last := vs[0].Lookup("_id").StringValue(), vs[len(vs)-1].Lookup("_id").StringValue()
		if (dir > 0) != (first < last) {
			t.Fatalf("system.version sorted by _id %d: %q first, %q last", dir, first, last)
		}
	}
	p := run(t, c.Database("admin"), bson.D{{Key: "getParameter", Value: 1}, {Key: "authSchemaVersion", Value: 1}})
	if p.Lookup("authSchemaVersion").Int32() != 5 {
		t.Fatalf("getParameter = %s", p)
	}
	// A capped collection's stats report its bounds.
	run(t, c.Database("app"), bson.D{{Key: "create", Value: "cap"}, {Key: "capped", Value: true}, {Key: "size", Value: 10000}, {Key: "max", Value: 5}})
	cs := run(t, c.Database("app"), bson.D{{Key: "collStats", Value: "cap"}})
	if !cs.Lookup("capped").Boolean() || cs.Lookup("maxSize").AsInt64() != 10000 || cs.Lookup("max").AsInt64() != 5 {
		t.Fatalf("collStats cap = %s", cs)
	}
}

// TestServerStatusForMongostat: the fields mongostat decodes, in mongod's
// types (uptime a whole number in a double), and opcounters that count.
func TestServerStatusForMongostat(t *testing.T) {
	_, c := setup(t)
	admin := c.Database("admin")
	before := run(t, admin, bson.D{{Key: "serverStatus", Value: 1}})
	coll := c.Database("ss").Collection("c")
	if _, err := coll.InsertMany(t.Context(), []any{bson.D{}, bson.D{}, bson.D{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(t.Context(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(t.Context(), bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	after := run(t, admin, bson.D{{Key: "serverStatus", Value: 1}})
	up := after.Lookup("uptime").Double()
	if up != float64(int64(up)) {
		t.Fatalf("uptime = %v, want a whole number of seconds", up)
	}
	delta := func(path ...string) int64 {
		return after.Lookup(path...).AsInt64() - before.Lookup(path...).AsInt64()
	}
	if delta("opcounters", "insert") != 3 || delta("opcounters", "update") != 1 || delta("opcounters", "query") != 1 || delta("opcounters", "command") < 1 {
		t.Fatalf("opcounters %s -> %s", before.Lookup("opcounters"), after.Lookup("opcounters"))
	}
	if delta("network", "bytesIn") <= 0 || delta("network", "numRequests") < 4 || after.Lookup("network", "bytesOut").AsInt64() <= 0 {
		t.Fatalf("network = %s", after.Lookup("network"))
	}
	for _, path := range [][]string{{"mem", "resident"}, {"mem", "virtual"}, {"globalLock", "totalTime"}, {"opcountersRepl", "insert"}, {"asserts", "regular"}} {
		if _, err := after.LookupErr(path...); err != nil {
			t.Errorf("serverStatus has no %v", path)
		}
	}
	if !after.Lookup("repl", "ismaster").Boolean() || after.Lookup("repl", "secondary").Boolean() {
		t.Fatalf("repl = %s", after.Lookup("repl"))
	}
}

// TestMergeAuthzCollections: mongorestore's user restore. Users loaded
// into a temporary collection replace the users of that name; drop
// removes the others of the scope; only root may run it.
func TestMergeAuthzCollections(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	ctx := t.Context()
	createUser(t, root, "shop", "alice", "alice-pw", "readWrite")
	createUser(t, root, "shop", "bob", "bob-pw", "read")
	var alice bson.Raw
	if err := root.Database("admin").Collection("system.users").FindOne(ctx, bson.D{{Key: "_id", Value: "shop.alice"}}).Decode(&alice); err != nil {
		t.Fatal(err)
	}
	run(t, root.Database("shop"), bson.D{{Key: "dropUser", Value: "alice"}})
	if _, err := connectAs(t, s, "alice", "alice-pw", "shop", ""); err == nil {
		t.Fatal("alice logs in after dropUser")
	}
	if _, err := root.Database("admin").Collection("tempusers").InsertOne(ctx, alice); err != nil {
		t.Fatal(err)
	}
	merge := bson.D{{Key: "_mergeAuthzCollections", Value: 1}, {Key: "tempUsersCollection", Value: "admin.tempusers"}, {Key: "db", Value: "shop"}, {Key: "drop", Value: true}}
	bob := mustConnectAs(t, s, "bob", "bob-pw", "shop", "")
	wantCode(t, bob.Database("admin").RunCommand(ctx, merge).Err(), 13, "not authorized")
	run(t, root.Database("admin"), merge)
	mustConnectAs(t, s, "alice", "alice-pw", "shop", "") // restored, with her credentials
	if _, err := connectAs(t, s, "bob", "bob-pw", "shop", ""); err == nil {
		t.Fatal("bob survives a merge with drop: true that does not hold him")
	}
	mustConnectAs(t, s, "admin", adminPassword, "admin", "") // outside the db scope: kept
	wantCode(t, root.Database("admin").RunCommand(ctx, bson.D{{Key: "_mergeAuthzCollections", Value: 1}, {Key: "tempUsersCollection", Value: "shop.x"}}).Err(), 2, "must be in the admin database")
	wantCode(t, root.Database("admin").RunCommand(ctx, bson.D{{Key: "_mergeAuthzCollections", Value: 1}}).Err(), 2, "at least one of")
	if _, err := root.Database("admin").Collection("temproles").InsertOne(ctx, bson.D{{Key: "_id", Value: "shop.r"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, root.Database("admin").RunCommand(ctx, bson.D{{Key: "_mergeAuthzCollections", Value: 1}, {Key: "tempRolesCollection", Value: "admin.temproles"}}).Err(), 115, "custom roles")
}

// TestTop: top (mongotop) reports, per namespace, the commands that named
// it: totals, readers and writers, and by kind, with times in µs.
func TestTop(t *testing.T) {
	_, c := setup(t)
	coll := c.Database("tp").Collection("c")
	for i := range 3 {
		if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := coll.FindOne(t.Context(), bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	r := run(t, c.Database("admin"), bson.D{{Key: "top", Value: 1}})
	e := r.Lookup("totals", "tp.c").Document()
	count := func(k string) int64 { return e.Lookup(k, "count").AsInt64() }
	if count("total") != 4 || count("insert") != 3 || count("queries") != 1 || count("writeLock") != 3 || count("readLock") != 1 || count("remove") != 0 {
		t.Fatalf("top tp.c = %s", e)
	}
	if e.Lookup("total", "time").AsInt64() < e.Lookup("insert", "time").AsInt64() {
		t.Fatalf("top total time below insert time: %s", e)
	}
	wantCode(t, c.Database("tp").RunCommand(t.Context(), bson.D{{Key: "top", Value: 1}}).Err(), 13, "may only be run against the admin database")
}

// TestApplyOpsPreserveUUID: a create entry with ui makes the collection
// with that UUID, once; later entries find it by UUID, whatever their ns
// says; the refusals of create still apply.
func TestApplyOpsPreserveUUID(t *testing.T) {
	_, c := setup(t)
	admin := c.Database("admin")
	ui := bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}
	create := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "pu.$cmd"}, {Key: "ui", Value: ui}, {Key: "o", Value: bson.D{{Key: "create", Value: "c"}, {Key: "idIndex", Value: bson.D{{Key: "key", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "name", Value: "_id_"}}}}}}
	run(t, admin, bson.D{{Key: "applyOps", Value: bson.A{create}}})
	r := run(t, c.Database("pu"), bson.D{{Key: "listCollections", Value: 1}})
	if _, data := r.Lookup("cursor", "firstBatch", "0", "info", "uuid").Binary(); string(data) != "0123456789abcdef" {
		t.Fatalf("listing = %s", r)
	}
	insert := bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "pu.elsewhere"}, {Key: "ui", Value: ui}, {Key: "o", Value: bson.D{{Key: "_id", Value: 1}}}}
	run(t, admin, bson.D{{Key: "applyOps", Value: bson.A{insert}}})
	if n, _ := c.Database("pu").Collection("c").CountDocuments(t.Context(), bson.D{}); n != 1 {
		t.Fatalf("the insert by UUID went elsewhere: %d documents in pu.c", n)
	}
	run(t, admin, bson.D{{Key: "applyOps", Value: bson.A{create}}}) // again: already applied
	other := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "pu.$cmd"}, {Key: "ui", Value: ui}, {Key: "o", Value: bson.D{{Key: "create", Value: "d"}}}}
	wantCode(t, admin.RunCommand(t.Context(), bson.D{{Key: "applyOps", Value: bson.A{other}}}).Err(), 48, "UUID 30313233-3435-3637-3839-616263646566 already exists")
	sys := bson.D{{Key: "op", Value: "c"}, {Key: "ns", Value: "admin.$cmd"}, {Key: "ui", Value: bson.Binary{Subtype: 4, Data: []byte("fedcba9876543210")}}, {Key: "o", Value: bson.D{{Key: "create", Value: "system.users"}}}}
	wantCode(t, admin.RunCommand(t.Context(), bson.D{{Key: "applyOps", Value: bson.A{sys}}}).Err(), 73, "cannot write to 'admin.system.users'")
}

// TestBackupRestoreRoles: backup reads what mongodump reads (users, the
// oplog, local and config) and writes nothing; restore writes any
// database and merges users, and reads no system collection.
func TestBackupRestoreRoles(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "admin", "bk", "bk-pw", "backup")
	createUser(t, root, "admin", "rs", "rs-pw", "restore")
	ctx := t.Context()
	if _, err := root.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	bk := mustConnectAs(t, s, "bk", "bk-pw", "admin", "")
	for _, ns := range [][2]string{{"app", "c"}, {"admin", "system.users"}, {"admin", "system.version"}, {"local", "oplog.rs"}, {"config", "transactions"}} {
		if err := bk.Database(ns[0]).Collection(ns[1]).FindOne(ctx, bson.D{}).Err(); err != nil && err != mongo.ErrNoDocuments {
			t.Errorf("backup find %s.%s: %v", ns[0], ns[1], err)
		}
	}
	if _, err := bk.Database("local").ListCollectionNames(ctx, bson.D{}); err != nil {
		t.Errorf("backup listCollections local: %v", err)
	}
	_, err := bk.Database("app").Collection("c").InsertOne(ctx, bson.D{})
	wantCode(t, err, 13, "not authorized")

	rs := mustConnectAs(t, s, "rs", "rs-pw", "admin", "")
	if _, err := rs.Database("other").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("restore insert: %v", err)
	}
	err = rs.Database("admin").Collection("system.users").FindOne(ctx, bson.D{}).Err()
	wantCode(t, err, 13, "not authorized")
	if _, err := rs.Database("admin").Collection("tempusers").InsertOne(ctx, bson.D{{Key: "_id", Value: "app.x"}, {Key: "user", Value: "x"}, {Key: "db", Value: "app"},
		{Key: "userId", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "credentials", Value: bson.D{}}, {Key: "roles", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	run(t, rs.Database("admin"), bson.D{{Key: "_mergeAuthzCollections", Value: 1}, {Key: "tempUsersCollection", Value: "admin.tempusers"}, {Key: "db", Value: "app"}})
	r := run(t, root.Database("app"), bson.D{{Key: "usersInfo", Value: "x"}})
	if vals, _ := r.Lookup("users").Array().Values(); len(vals) != 1 {
		t.Fatalf("merged user x: %s", r)
	}
	// restore may replay user entries (checked as user documents), backup not.
	userOp := bson.D{{Key: "applyOps", Value: bson.A{bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "admin.system.users"}, {Key: "o", Value: bson.D{{Key: "_id", Value: "app.y"}}}}}}}
	wantCode(t, rs.Database("admin").RunCommand(ctx, userOp).Err(), 2, "not db.user")
	wantCode(t, bk.Database("admin").RunCommand(ctx, userOp).Err(), 13, "not authorized")
}

// TestApplyOpsUsers: entries on admin.system.users (createUser, updateUser
// and dropUser as the oplog records them) go through the user store: the
// user can log in after an insert and cannot after a delete.
func TestApplyOpsUsers(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	ctx := t.Context()
	createUser(t, root, "shop", "carol", "carol-pw", "read")
	var doc bson.Raw
	if err := root.Database("admin").Collection("system.users").FindOne(ctx, bson.D{{Key: "_id", Value: "shop.carol"}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	run(t, root.Database("shop"), bson.D{{Key: "dropUser", Value: "carol"}})
	apply := func(c *mongo.Client, op bson.D) error {
		return c.Database("admin").RunCommand(ctx, bson.D{{Key: "applyOps", Value: bson.A{op}}}).Err()
	}
	insert := bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "admin.system.users"}, {Key: "ui", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}, {Key: "o", Value: doc}}
	createUser(t, root, "shop", "dave", "dave-pw", "readWrite")
	dave := mustConnectAs(t, s, "dave", "dave-pw", "shop", "")
	wantCode(t, apply(dave, insert), 13, "not authorized")
	if err := apply(root, insert); err != nil {
		t.Fatal(err)
	}
	mustConnectAs(t, s, "carol", "carol-pw", "shop", "")
	if err := apply(root, bson.D{{Key: "op", Value: "d"}, {Key: "ns", Value: "admin.system.users"}, {Key: "o", Value: bson.D{{Key: "_id", Value: "shop.carol"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := connectAs(t, s, "carol", "carol-pw", "shop", ""); err == nil {
		t.Fatal("carol logs in after the delete entry")
	}
	wantCode(t, apply(root, bson.D{{Key: "op", Value: "i"}, {Key: "ns", Value: "admin.system.users"}, {Key: "o", Value: bson.D{{Key: "_id", Value: "shop.x"}, {Key: "user", Value: "y"}, {Key: "db", Value: "shop"}}}}), 2, "not db.user")
}
