package mongowire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

func setup(t *testing.T, opts ...func(*mongowire.Config)) (*mongowire.Server, *mongo.Client) {
	t.Helper()
	s := testenv.MongoWire(t, opts...)
	return s, testenv.MongoClient(t, s.URI())
}

func run(t *testing.T, db *mongo.Database, cmd bson.D) bson.Raw {
	t.Helper()
	r, err := db.RunCommand(t.Context(), cmd).Raw()
	if err != nil {
		t.Fatalf("%s: %v", cmd[0].Key, err)
	}
	return r
}

// wantCode asserts err is a server error with the given code.
func wantCode(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(code)) {
		t.Fatalf("error = %v, want code %d", err, code)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("error = %v, want it to mention %q", err, msg)
	}
}

func TestURIs(t *testing.T) {
	s := testenv.MongoWire(t)
	for name, uri := range map[string]string{
		"replicaSet":       s.URI(),
		"directConnection": "mongodb://" + s.Addr() + "/?directConnection=true",
	} {
		t.Run(name, func(t *testing.T) {
			c := testenv.MongoClient(t, uri)
			if err := c.Ping(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			// A write needs a writable primary: server selection proves the
			// topology was understood.
			if _, err := c.Database("uris").Collection("c").InsertOne(t.Context(), bson.D{{Key: "x", Value: 1}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestHello(t *testing.T) {
	s, c := setup(t, func(cfg *mongowire.Config) { cfg.ReplSet = "rsT" })
	admin := c.Database("admin")
	r := run(t, admin, bson.D{{Key: "hello", Value: 1}})
	checks := map[string]bool{
		"isWritablePrimary": r.Lookup("isWritablePrimary").Boolean(),
		"setName":           r.Lookup("setName").StringValue() == "rsT",
		"primary":           r.Lookup("primary").StringValue() == s.Addr(),
		"me":                r.Lookup("me").StringValue() == s.Addr(),
		"hosts":             r.Lookup("hosts", "0").StringValue() == s.Addr(),
		"maxWireVersion":    r.Lookup("maxWireVersion").AsInt64() == 21,
		"sessions":          r.Lookup("logicalSessionTimeoutMinutes").AsInt64() == 30,
		"connectionId":      r.Lookup("connectionId").AsInt64() > 0,
		"localTime":         r.Lookup("localTime").Type == bson.TypeDateTime,
		"maxBsonObjectSize": r.Lookup("maxBsonObjectSize").AsInt64() == 16<<20,
		"$clusterTime":      r.Lookup("$clusterTime", "clusterTime").Type == bson.TypeTimestamp,
		"operationTime":     r.Lookup("operationTime").Type == bson.TypeTimestamp,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("hello %s wrong in %v", name, r)
		}
	}
	if _, err := r.LookupErr("topologyVersion"); err == nil {
		t.Error("hello has topologyVersion, but awaitable hello is not implemented")
	}
	legacy := run(t, admin, bson.D{{Key: "isMaster", Value: 1}})
	if !legacy.Lookup("ismaster").Boolean() {
		t.Errorf("isMaster reply %v lacks ismaster: true", legacy)
	}
}

func TestAdvertise(t *testing.T) {
	s := testenv.MongoWire(t, func(c *mongowire.Config) { c.Advertise = "localhost:1" })
	if s.URI() != "mongodb://localhost:1/?replicaSet=rs0" {
		t.Fatalf("URI = %s", s.URI())
	}
	c := testenv.MongoClient(t, "mongodb://"+s.Addr()+"/?directConnection=true")
	r := run(t, c.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	if r.Lookup("me").StringValue() != "localhost:1" {
		t.Fatalf("me = %v", r.Lookup("me"))
	}
}

func TestAdminCommands(t *testing.T) {
	s, c := setup(t)
	admin := c.Database("admin")
	tests := map[string]struct {
		cmd   bson.D
		check func(bson.Raw) bool
	}{
		"ping":      {bson.D{{Key: "ping", Value: 1}}, func(r bson.Raw) bool { return r.Lookup("ok").AsFloat64() == 1 }},
		"buildInfo": {bson.D{{Key: "buildInfo", Value: 1}}, func(r bson.Raw) bool { return strings.HasPrefix(r.Lookup("version").StringValue(), "7.0.") }},
		"getParameter *": {bson.D{{Key: "getParameter", Value: "*"}}, func(r bson.Raw) bool {
			return r.Lookup("featureCompatibilityVersion", "version").StringValue() == "7.0"
		}},
		"getParameter fcv": {bson.D{{Key: "getParameter", Value: 1}, {Key: "featureCompatibilityVersion", Value: 1}}, func(r bson.Raw) bool {
			_, err := r.LookupErr("quiet")
			return r.Lookup("featureCompatibilityVersion", "version").StringValue() == "7.0" && err != nil
		}},
		"getCmdLineOpts":   {bson.D{{Key: "getCmdLineOpts", Value: 1}}, func(r bson.Raw) bool { return r.Lookup("parsed", "replication", "replSet").StringValue() == "rs0" }},
		"serverStatus":     {bson.D{{Key: "serverStatus", Value: 1}}, func(r bson.Raw) bool { return r.Lookup("connections", "current").AsInt64() >= 1 }},
		"connectionStatus": {bson.D{{Key: "connectionStatus", Value: 1}}, func(r bson.Raw) bool { return r.Lookup("authInfo").Type == bson.TypeEmbeddedDocument }},
		"hostInfo":         {bson.D{{Key: "hostInfo", Value: 1}}, func(r bson.Raw) bool { return r.Lookup("system", "numCores").AsInt64() > 0 }},
		"whatsmyuri":       {bson.D{{Key: "whatsmyuri", Value: 1}}, func(r bson.Raw) bool { return strings.HasPrefix(r.Lookup("you").StringValue(), "127.0.0.1:") }},
		"replSetGetConfig": {bson.D{{Key: "replSetGetConfig", Value: 1}}, func(r bson.Raw) bool {
			id, ok := r.Lookup("config", "settings", "replicaSetId").ObjectIDOK()
			return ok && id == s.Store().ReplicaSetID() && r.Lookup("config", "members", "0", "host").StringValue() == s.Addr()
		}},
		"replSetGetStatus": {bson.D{{Key: "replSetGetStatus", Value: 1}}, func(r bson.Raw) bool {
			return r.Lookup("myState").AsInt64() == 1 && r.Lookup("members", "0", "stateStr").StringValue() == "PRIMARY"
		}},
		"endSessions":     {bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}}}, nil},
		"killSessions":    {bson.D{{Key: "killSessions", Value: bson.A{}}}, nil},
		"killAllSessions": {bson.D{{Key: "killAllSessions", Value: bson.A{}}}, nil},
		"getLog":          {bson.D{{Key: "getLog", Value: "startupWarnings"}}, func(r bson.Raw) bool { return r.Lookup("log").Type == bson.TypeArray }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := run(t, admin, tc.cmd)
			if tc.check != nil && !tc.check(r) {
				t.Fatalf("reply %v", r)
			}
		})
	}
}

func TestCommandErrors(t *testing.T) {
	_, c := setup(t)
	db := c.Database("errs")
	if _, err := db.Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cmd  bson.D
		code int32
		msg  string
	}{
		"unknown command":               {bson.D{{Key: "noSuchCommand", Value: 1}}, 59, "no such command: 'noSuchCommand'"},
		"admin only":                    {bson.D{{Key: "listDatabases", Value: 1}}, 13, "may only be run against the admin database"},
		"fail point disabled":           {bson.D{{Key: "configureFailPoint", Value: "failCommand"}}, 59, "no such command"},
		"unknown query operator":        {bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$frob", Value: 1}}}}}}, 2, "$frob"},
		"unknown update operator":       {bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$frob", Value: bson.D{{Key: "a", Value: 1}}}}}}}}}, 0, "$frob"},
		"negative skip":                 {bson.D{{Key: "find", Value: "c"}, {Key: "skip", Value: -1}}, 2, "Skip value must be non-negative"},
		"wrong type":                    {bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: "x"}}, 14, "'find.filter' is the wrong type 'string'"},
		"bad collection name":           {bson.D{{Key: "find", Value: 3.5}}, 73, "collection name has invalid type double"},
		"cursor not found":              {bson.D{{Key: "getMore", Value: int64(12345)}, {Key: "collection", Value: "c"}}, 43, "cursor id 12345 not found"},
		"getMore id type":               {bson.D{{Key: "getMore", Value: "x"}, {Key: "collection", Value: "c"}}, 14, "wrong type"},
		"delete limit":                  {bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 5}}}}}, 9, "must be 0 or 1"},
		"empty insert":                  {bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{}}}, 16, "Write batch sizes"},
		"findAndModify neither":         {bson.D{{Key: "findAndModify", Value: "c"}}, 9, "Either an update or remove=true"},
		"aggregate no cursor":           {bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}}, 9, "'cursor' option is required"},
		"unknown stage":                 {bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$frob", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}, 40324, "$frob"},
		"transaction without txnNumber": {bson.D{{Key: "find", Value: "c"}, {Key: "startTransaction", Value: true}, {Key: "autocommit", Value: false}}, 72, "require a txnNumber"},
		"txnNumber on a read":           {bson.D{{Key: "find", Value: "c"}, {Key: "txnNumber", Value: int64(1)}}, 50768, "txnNumber may only be provided"},
		"collation":                     {bson.D{{Key: "find", Value: "c"}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}, {Key: "caseFirst", Value: "upper"}}}}, 115, "caseFirst"},
		"collation in a statement":      {bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 1}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}, {Key: "caseLevel", Value: true}}}}}}}, 115, "caseLevel"},
		"index without key":             {bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "name", Value: "x"}}}}}, 9, "'key' field is a required property"},
		"index on empty field":          {bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "", Value: 1}}}}}}}, 67, "cannot be an empty field"},
		"no indexes":                    {bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{}}}, 2, "at least one index"},
		"rename outside admin":          {bson.D{{Key: "renameCollection", Value: "errs.c"}, {Key: "to", Value: "errs.d"}}, 13, "admin database"},
		"drop index missing":            {bson.D{{Key: "dropIndexes", Value: "c"}}, 40414, "BSON field 'dropIndexes.index' is missing but a required field"},
		"unknown find field":            {bson.D{{Key: "find", Value: "c"}, {Key: "frob", Value: 1}}, 40415, "BSON field 'find.frob' is an unknown field."},
		"unknown insert field":          {bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "let", Value: bson.D{}}}, 40415, "BSON field 'insert.let' is an unknown field."},
		"unknown statement field":       {bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}, {Key: "sort", Value: bson.D{}}}}}}, 40415, "BSON field 'update.updates.sort' is an unknown field."},
		"unknown create option":         {bson.D{{Key: "create", Value: "new"}, {Key: "cappedd", Value: true}}, 40415, "BSON field 'create.cappedd' is an unknown field."},
		"unknown hint":                  {bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: bson.D{{Key: "zz", Value: 1}}}}, 2, "hint provided does not correspond to an existing index"},
		"unknown hint name":             {bson.D{{Key: "count", Value: "c"}, {Key: "hint", Value: "zz_1"}}, 2, "hint provided does not correspond to an existing index"},
		"unknown statement hint":        {bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 1}, {Key: "hint", Value: "zz_1"}}}}}, 0, "hint provided does not correspond to an existing index"},
		"system collection write":       {bson.D{{Key: "insert", Value: "system.foo"}, {Key: "documents", Value: bson.A{bson.D{}}}}, 73, "cannot write to 'errs.system.foo'"},
		"statement without u":           {bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, 40414, "BSON field 'update.updates.u' is missing but a required field"},
		"delete without limit":          {bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}}}}}, 40414, "BSON field 'delete.deletes.limit' is missing but a required field"},
		"getMore without coll":          {bson.D{{Key: "getMore", Value: int64(1)}}, 40414, "BSON field 'getMore.collection' is missing but a required field"},
		"multi replacement":             {bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "multi", Value: true}}}}}, 0, "multi update is not supported for replacement-style update"},
		"getLog outside admin":          {bson.D{{Key: "getLog", Value: "nope"}}, 13, "admin database"},
		"duplicate _id":                 {bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}, 0, "E11000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := db.RunCommand(t.Context(), tc.cmd).Raw()
			if tc.code == 0 { // a write error: ok: 1 with writeErrors, which the driver raises
				var we mongo.WriteException
				if !errors.As(err, &we) || len(we.WriteErrors) != 1 || !strings.Contains(we.WriteErrors[0].Message, tc.msg) {
					t.Fatalf("reply %v, error %v; want one write error mentioning %q", r, err, tc.msg)
				}
				return
			}
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestCRUD(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("crud").Collection("people")
	docs := []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "ada"}, {Key: "age", Value: 36}, {Key: "tags", Value: bson.A{"math"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "bob"}, {Key: "age", Value: 25}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "cyd"}, {Key: "age", Value: 41}},
	}
	if res, err := coll.InsertMany(ctx, docs); err != nil || len(res.InsertedIDs) != 3 {
		t.Fatalf("InsertMany = %v, %v", res, err)
	}
	// Filter, sort, projection, skip, limit.
	cur, err := coll.Find(ctx, bson.D{{Key: "age", Value: bson.D{{Key: "$gt", Value: 30}}}},
		options.Find().SetSort(bson.D{{Key: "age", Value: -1}}).SetProjection(bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 0}}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for cur.Next(ctx) {
		elems, _ := cur.Current.Elements()
		if len(elems) != 1 {
			t.Fatalf("projected document %v", cur.Current)
		}
		got = append(got, cur.Current.Lookup("name").StringValue())
	}
	if err := cur.Err(); err != nil || fmt.Sprint(got) != "[cyd ada]" {
		t.Fatalf("find = %v, %v", got, err)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{{Key: "age", Value: bson.D{{Key: "$lt", Value: 40}}}}); err != nil || n != 2 {
		t.Fatalf("CountDocuments = %d, %v", n, err)
	}
	if n, err := coll.EstimatedDocumentCount(ctx); err != nil || n != 3 {
		t.Fatalf("EstimatedDocumentCount = %d, %v", n, err)
	}
	// Updates with operators, upsert, multi, arrayFilters and a pipeline.
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "age", Value: 1}}}, {Key: "$push", Value: bson.D{{Key: "tags", Value: "new"}}}})
	if err != nil || res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Fatalf("UpdateOne = %+v, %v", res, err)
	}
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "zed"}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil || res.UpsertedCount != 1 || res.UpsertedID != int32(9) {
		t.Fatalf("upsert = %+v, %v", res, err)
	}
	res, err = coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}})
	if err != nil || res.MatchedCount != 4 || res.ModifiedCount != 4 {
		t.Fatalf("UpdateMany = %+v, %v", res, err)
	}
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "tags.$[t]", Value: "logic"}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "t", Value: "math"}}}))
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("arrayFilters update = %+v, %v", res, err)
	}
	res, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "age2", Value: bson.D{{Key: "$multiply", Value: bson.A{"$age", 2}}}}}}}})
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("pipeline update = %+v, %v", res, err)
	}
	res, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "name", Value: "zoe"}})
	if err != nil || res.ModifiedCount != 1 {
		t.Fatalf("ReplaceOne = %+v, %v", res, err)
	}
	var one bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&one); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(one["tags"]) != "[logic]" || one["seen"] != true {
		t.Fatalf("after updates: %v", one)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 3}}).Decode(&one); err != nil || one["age2"] != int32(82) {
		t.Fatalf("after pipeline update: %v, %v", one, err)
	}
	// findAndModify in its forms.
	var before, after bson.M
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "age", Value: 30}}}}).Decode(&before); err != nil || before["age"] != int32(26) {
		t.Fatalf("FindOneAndUpdate before = %v, %v", before, err)
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "age", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after); err != nil || after["age"] != int32(31) {
		t.Fatalf("FindOneAndUpdate after = %v, %v", after, err)
	}
	if err := coll.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: 9}}).Decode(&before); err != nil || before["name"] != "zoe" {
		t.Fatalf("FindOneAndDelete = %v, %v", before, err)
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 77}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("FindOneAndUpdate on nothing = %v, want ErrNoDocuments", err)
	}
	// distinct and aggregate.
	dr := coll.Distinct(ctx, "seen", bson.D{})
	var seen []bool
	if err := dr.Decode(&seen); err != nil || fmt.Sprint(seen) != "[true]" {
		t.Fatalf("Distinct = %v, %v", seen, err)
	}
	acur, err := coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "age", Value: bson.D{{Key: "$gte", Value: 30}}}}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$age"}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var agg []bson.M
	if err := acur.All(ctx, &agg); err != nil || len(agg) != 1 || agg[0]["total"] != int32(36+31+41) {
		t.Fatalf("Aggregate = %v, %v", agg, err)
	}
	// Deletes.
	if dres, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil || dres.DeletedCount != 1 {
		t.Fatalf("DeleteOne = %+v, %v", dres, err)
	}
	if dres, err := coll.DeleteMany(ctx, bson.D{}); err != nil || dres.DeletedCount != 2 {
		t.Fatalf("DeleteMany = %+v, %v", dres, err)
	}
}

func TestCursorBatches(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	var getMores atomic.Int32
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "getMore" {
			getMores.Add(1)
		}
	}}
	s := testenv.MongoWire(t)
	mc, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Disconnect(context.Background())
	_ = c
	coll := mc.Database("cur").Collection("c")
	docs := make([]any, 250)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		opts     *options.FindOptionsBuilder
		want     int
		getMores int32
	}{
		"default batches": {options.Find(), 250, 1}, // 101, then the rest
		"batchSize 100":   {options.Find().SetBatchSize(100), 250, 2},
		"batchSize 0":     {options.Find().SetBatchSize(0), 250, 1},
		"limit":           {options.Find().SetLimit(120).SetBatchSize(50), 120, 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			getMores.Store(0)
			cur, err := coll.Find(ctx, bson.D{}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for cur.Next(ctx) {
				if cur.Current.Lookup("_id").AsInt64() != int64(n) {
					t.Fatalf("doc %d is %v", n, cur.Current)
				}
				n++
			}
			if err := cur.Err(); err != nil || n != tc.want {
				t.Fatalf("read %d docs, err %v; want %d", n, err, tc.want)
			}
			if g := getMores.Load(); g != tc.getMores {
				t.Errorf("%d getMores, want %d", g, tc.getMores)
			}
		})
	}
	// An abandoned cursor is killed.
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(10))
	if err != nil {
		t.Fatal(err)
	}
	id := cur.ID()
	if id == 0 {
		t.Fatal("no cursor for a partial batch")
	}
	if err := cur.Close(ctx); err != nil {
		t.Fatal(err)
	}
	err = mc.Database("cur").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err()
	wantCode(t, err, 43, "not found")
	// getMore on another namespace is refused.
	cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	err = mc.Database("cur").RunCommand(ctx, bson.D{{Key: "getMore", Value: cur.ID()}, {Key: "collection", Value: "other"}}).Err()
	wantCode(t, err, 13, "different namespace")
}

func TestDDLAndIndexes(t *testing.T) {
	s, c := setup(t)
	ctx := t.Context()
	db := c.Database("ddl")
	if err := db.CreateCollection(ctx, "a", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}})); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateCollection(ctx, "a"), 48, "")
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "a"}})
	if err != nil || len(specs) != 1 {
		t.Fatalf("ListCollectionSpecifications = %v, %v", specs, err)
	}
	if specs[0].UUID == nil || specs[0].IDIndex.Name != "_id_" || !strings.Contains(specs[0].Options.String(), "changeStreamPreAndPostImages") {
		t.Fatalf("spec = %+v", specs[0])
	}
	if info, ok := s.Store().Collection(store0("ddl", "a")); !ok || !info.PreAndPostImages {
		t.Fatalf("store collection = %+v, %v", info, ok)
	}
	run(t, db, bson.D{{Key: "collMod", Value: "a"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: false}}}})
	if info, _ := s.Store().Collection(store0("ddl", "a")); info.PreAndPostImages {
		t.Fatal("collMod did not disable pre- and post-images")
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil || fmt.Sprint(names) != "[a]" {
		t.Fatalf("ListCollectionNames = %v, %v", names, err)
	}
	// Indexes and a duplicate key.
	coll := db.Collection("a")
	name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true)})
	if err != nil || name != "email_1" {
		t.Fatalf("CreateOne = %q, %v", name, err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "email", Value: "a@x"}}); err != nil {
		t.Fatal(err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "email", Value: "a@x"}})
	if !mongo.IsDuplicateKeyError(err) || !strings.Contains(err.Error(), "email_1") {
		t.Fatalf("duplicate insert = %v, want E11000 on email_1", err)
	}
	icur, err := coll.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var idx []bson.M
	if err := icur.All(ctx, &idx); err != nil || len(idx) != 2 || idx[1]["unique"] != true {
		t.Fatalf("listIndexes = %v, %v", idx, err)
	}
	wantCode(t, coll.Indexes().DropOne(ctx, "nope_1"), 27, "")
	if err := coll.Indexes().DropOne(ctx, "email_1"); err != nil {
		t.Fatal(err)
	}
	run(t, db, bson.D{{Key: "createIndexes", Value: "a"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "k", Value: -1}}}}}}})
	r := run(t, db, bson.D{{Key: "dropIndexes", Value: "a"}, {Key: "index", Value: bson.D{{Key: "k", Value: -1}}}})
	if r.Lookup("nIndexesWas").AsInt64() != 2 {
		t.Fatalf("dropIndexes by key = %v", r)
	}
	// Rename, drop, dropDatabase.
	r = run(t, c.Database("admin"), bson.D{{Key: "renameCollection", Value: "ddl.a"}, {Key: "to", Value: "ddl.b"}})
	if names, _ := db.ListCollectionNames(ctx, bson.D{}); fmt.Sprint(names) != "[b]" {
		t.Fatalf("after rename: %v", names)
	}
	wantCode(t, c.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ddl.zz"}, {Key: "to", Value: "ddl.b"}}).Err(), 26, "")
	if _, err := db.Collection("t").InsertOne(ctx, bson.D{{Key: "_id", Value: "t"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "ddl.t"}, {Key: "to", Value: "ddl.b"}}).Err(), 48, "")
	run(t, c.Database("admin"), bson.D{{Key: "renameCollection", Value: "ddl.t"}, {Key: "to", Value: "ddl.b"}, {Key: "dropTarget", Value: true}})
	if err := db.Collection("b").FindOne(ctx, bson.D{{Key: "_id", Value: "t"}}).Err(); err != nil {
		t.Fatalf("after rename with dropTarget: %v", err)
	}
	var se mongo.ServerError
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "capped"}, {Key: "capped", Value: true}}).Err(); !errors.As(err, &se) || !strings.Contains(err.Error(), "'size' field is required") {
		t.Fatalf("create capped without size = %v, want a clear refusal", err)
	}
	if err := db.Collection("b").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	r = run(t, db, bson.D{{Key: "drop", Value: "b"}}) // missing: fine since 7.0
	if r.Lookup("ns").StringValue() != "ddl.b" {
		t.Fatalf("drop of a missing collection = %v", r)
	}
	if _, err := db.Collection("x").InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	st := run(t, db, bson.D{{Key: "dbStats", Value: 1}})
	if st.Lookup("collections").AsInt64() != 1 || st.Lookup("objects").AsInt64() != 1 || st.Lookup("db").StringValue() != "ddl" {
		t.Fatalf("dbStats = %v, want collection x with its 1 document", st)
	}
	dbs, err := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "ddl"}})
	if err != nil || fmt.Sprint(dbs) != "[ddl]" {
		t.Fatalf("ListDatabaseNames = %v, %v", dbs, err)
	}
	if err := db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if dbs, _ := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "ddl"}}); len(dbs) != 0 {
		t.Fatalf("after dropDatabase: %v", dbs)
	}
}

func TestRetryableWriteReplaysStoredReply(t *testing.T) {
	_, c := setup(t)
	db := c.Database("retry")
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}}}
	insert := func(txn int64, id int) bson.Raw {
		r, err := db.RunCommand(t.Context(), bson.D{
			{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
			{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: txn},
		}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := insert(1, 1)
	again := insert(1, 1) // a retry: the stored reply, no duplicate key error
	if first.Lookup("n").AsInt64() != 1 || again.Lookup("n").AsInt64() != 1 {
		t.Fatalf("first %v, retry %v", first, again)
	}
	if _, err := again.LookupErr("writeErrors"); err == nil {
		t.Fatalf("retry re-executed: %v", again)
	}
	insert(2, 2)
	err := db.RunCommand(t.Context(), bson.D{
		{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 3}}}},
		{Key: "lsid", Value: lsid}, {Key: "txnNumber", Value: int64(1)},
	}).Err()
	wantCode(t, err, 225, "newer retryable write")
	if n, _ := db.Collection("c").CountDocuments(t.Context(), bson.D{}); n != 2 {
		t.Fatalf("%d documents, want 2", n)
	}
}

func TestFailCommand(t *testing.T) {
	s, c := setup(t, func(cfg *mongowire.Config) { cfg.EnableTestCommands = true })
	ctx := t.Context()
	admin := c.Database("admin")
	coll := c.Database("fp").Collection("c")
	fail := func(mode any, data bson.D) {
		t.Helper()
		run(t, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data}})
	}
	t.Run("errorCode times", func(t *testing.T) {
		fail(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 2}, {Key: "errorLabels", Value: bson.A{"MyLabel"}}})
		err := coll.FindOne(ctx, bson.D{}).Err()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(2) || !se.HasErrorLabel("MyLabel") {
			t.Fatalf("first find = %v, want code 2 with MyLabel", err)
		}
		if err := coll.FindOne(ctx, bson.D{}).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("second find = %v, want it to run", err)
		}
	})
	t.Run("retryable write survives closeConnection", func(t *testing.T) {
		fail(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "closeConnection", Value: true}})
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "r"}}); err != nil {
			t.Fatalf("insert with a retry = %v", err)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "r"}}); n != 1 {
			t.Fatalf("%d documents", n)
		}
	})
	t.Run("retryable error label", func(t *testing.T) {
		fail(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 91}})
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "s"}}); err != nil {
			t.Fatalf("insert after a ShutdownInProgress with RetryableWriteError = %v", err)
		}
	})
	t.Run("skip and off", func(t *testing.T) {
		fail(bson.D{{Key: "skip", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"count"}}, {Key: "errorCode", Value: 8}})
		if _, err := coll.EstimatedDocumentCount(ctx); err != nil {
			t.Fatalf("skipped count = %v", err)
		}
		if _, err := coll.EstimatedDocumentCount(ctx); err == nil {
			t.Fatal("count after the skip succeeded")
		}
		r := run(t, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
		if r.Lookup("count").AsInt64() != 1 {
			t.Fatalf("count = %v, want 1 activation", r)
		}
		if _, err := coll.EstimatedDocumentCount(ctx); err != nil {
			t.Fatalf("count after off = %v", err)
		}
	})
	t.Run("blockConnection", func(t *testing.T) {
		fail(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 200}})
		start := time.Now()
		if err := c.Ping(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("blocked ping took %v, want at least 200ms", d)
		}
	})
	t.Run("appName", func(t *testing.T) {
		fail("alwaysOn", bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 8}, {Key: "appName", Value: "victim"}})
		defer run(t, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "r"}}).Err(); err != nil {
			t.Fatalf("find from another application = %v", err)
		}
		victim, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetAppName("victim"))
		if err != nil {
			t.Fatal(err)
		}
		defer victim.Disconnect(context.Background())
		wantCode(t, victim.Database("fp").Collection("c").FindOne(ctx, bson.D{}).Err(), 8, "failCommand")
	})
	t.Run("writeConcernError", func(t *testing.T) {
		fail(bson.D{{Key: "times", Value: 1}}, bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}})
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "wce"}})
		var we mongo.WriteException
		if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 {
			t.Fatalf("insert = %v, want a writeConcernError 64", err)
		}
		if n, _ := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: "wce"}}); n != 1 {
			t.Fatal("the command did not run under a writeConcernError fail point")
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		err := admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "sometimes"}}).Err()
		wantCode(t, err, 2, "unknown mode")
	})
}

func TestConcurrentIncrements(t *testing.T) {
	_, c := setup(t)
	coll := c.Database("conc").Collection("c")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				if _, err := coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var doc struct{ N int }
	if err := coll.FindOne(t.Context(), bson.D{}).Decode(&doc); err != nil || doc.N != workers*each {
		t.Fatalf("n = %d, %v; want %d", doc.N, err, workers*each)
	}
}

func TestDataDirPersists(t *testing.T) {
	dir := t.TempDir()
	start := func() (*mongowire.Server, *mongo.Client) {
		s := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0", DataDir: dir})
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
		if err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	s, c := start()
	id := s.Store().ReplicaSetID()
	if _, err := c.Database("p").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: "kept"}}); err != nil {
		t.Fatal(err)
	}
	c.Disconnect(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, c = start()
	defer s.Close()
	defer c.Disconnect(context.Background())
	if s.Store().ReplicaSetID() != id {
		t.Fatal("replicaSetId changed across a restart")
	}
	if n, err := c.Database("p").Collection("c").CountDocuments(t.Context(), bson.D{{Key: "_id", Value: "kept"}}); err != nil || n != 1 {
		t.Fatalf("after restart: %d, %v", n, err)
	}
}

func store0(db, coll string) store.Namespace { return store.Namespace{DB: db, Coll: coll} }

func TestOversizedDocumentRefused(t *testing.T) {
	_, c := setup(t)
	db := c.Database("big")
	big := bson.D{{Key: "_id", Value: 2}, {Key: "pad", Value: strings.Repeat("x", 16<<20)}}
	// The driver refuses to send it through InsertOne; a raw command gets through.
	r, err := db.RunCommand(t.Context(), bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{
		bson.D{{Key: "_id", Value: 1}}, big, bson.D{{Key: "_id", Value: 3}},
	}}, {Key: "ordered", Value: false}}).Raw()
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 10334 || we.WriteErrors[0].Index != 1 {
		t.Fatalf("reply %v, err %v; want one BSONObjectTooLarge write error at index 1", r, err)
	}
	if n, _ := db.Collection("c").CountDocuments(t.Context(), bson.D{}); n != 2 {
		t.Fatalf("%d documents stored, want the 2 small ones", n)
	}
}

func TestTooDeepDocumentRefused(t *testing.T) {
	_, c := setup(t)
	var v any = 1
	for range 120 {
		v = bson.D{{Key: "a", Value: v}}
	}
	_, err := c.Database("deep").Collection("c").InsertOne(t.Context(), bson.D{{Key: "d", Value: v}})
	var we mongo.WriteException
	if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 15 || !strings.Contains(we.WriteErrors[0].Message, "nesting") {
		t.Fatalf("insert of a 121-deep document = %v, want an Overflow write error", err)
	}
}

// A malformed statement fails the whole write command before any statement
// runs, as mongod's IDL parser does; an execution failure is a write error
// of its statement only.
func TestMalformedStatementRunsNone(t *testing.T) {
	_, c := setup(t)
	db := c.Database("stmts")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(t.Context(), []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	err := db.RunCommand(t.Context(), bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "limit", Value: 2}},
	}}}).Err()
	wantCode(t, err, 9, "The limit field in delete objects must be 0 or 1. Got 2")
	err = db.RunCommand(t.Context(), bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 2}}}, {Key: "u", Value: "x"}},
	}}}).Err()
	wantCode(t, err, 9, "Update argument must be either an object or an array")
	if n, err := coll.CountDocuments(t.Context(), bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: false}}}}); err != nil || n != 2 {
		t.Fatalf("%d untouched documents (%v), want 2: a statement ran before the command was refused", n, err)
	}
}

// A write concern this one-member replica set cannot satisfy is reported
// as mongod reports it, in writeConcernError after the write is applied.
func TestUnsatisfiableWriteConcern(t *testing.T) {
	_, c := setup(t)
	db := c.Database("wc")
	tests := map[string]struct {
		w        any
		code     int32
		codeName string
		msg      string
	}{
		"w 2":         {2, 100, "UnsatisfiableWriteConcern", "Not enough data-bearing nodes"},
		"unknown tag": {"dc", 79, "UnknownReplWriteConcern", "No write concern mode named 'dc' found in replica set configuration"},
		"majority":    {"majority", 0, "", ""},
		"w 1":         {1, 0, "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			coll := "c" + strings.ReplaceAll(name, " ", "")
			r, err := db.RunCommand(t.Context(), bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
				{Key: "writeConcern", Value: bson.D{{Key: "w", Value: tc.w}}}}).Raw()
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if _, lerr := r.LookupErr("writeConcernError"); lerr == nil {
					t.Fatalf("reply %v has a writeConcernError", r)
				}
				return
			}
			var we mongo.WriteException
			if !errors.As(err, &we) || we.WriteConcernError == nil {
				t.Fatalf("reply %v, error %v: want a write concern error", r, err)
			}
			if wce := we.WriteConcernError; wce.Code != int(tc.code) || wce.Name != tc.codeName || wce.Message != tc.msg {
				t.Fatalf("writeConcernError %d %s %q, want %d %s %q", wce.Code, wce.Name, wce.Message, tc.code, tc.codeName, tc.msg)
			}
			if n, _ := db.Collection(coll).CountDocuments(t.Context(), bson.D{}); n != 1 {
				t.Fatalf("%d documents: the write must be applied despite the write concern error", n)
			}
		})
	}
}

// collStats and $collStats answer what mongosh's db.c.stats() reads; a
// missing collection is 26 NamespaceNotFound.
func TestCollStats(t *testing.T) {
	_, c := setup(t)
	db := c.Database("stats")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(t.Context(), []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, db, bson.D{{Key: "collStats", Value: "c"}})
	if r.Lookup("ns").StringValue() != "stats.c" || r.Lookup("count").Int32() != 2 || r.Lookup("nindexes").Int32() != 2 ||
		r.Lookup("size").Int32() != 2*14 || r.Lookup("avgObjSize").Int32() != 14 {
		t.Fatalf("collStats %v", r)
	}
	cur, err := coll.Aggregate(t.Context(), mongo.Pipeline{
		{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}, {Key: "count", Value: bson.D{}}}}},
		{{Key: "$project", Value: bson.D{{Key: "n", Value: "$storageStats.count"}, {Key: "count", Value: 1}, {Key: "ns", Value: 1}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(t.Context(), &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Lookup("n").Int32() != 2 || docs[0].Lookup("count").Int32() != 2 || docs[0].Lookup("ns").StringValue() != "stats.c" {
		t.Fatalf("$collStats %v", docs)
	}
	_, err = db.Collection("nope").Aggregate(t.Context(), mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	wantCode(t, err, 26, "Collection [stats.nope] not found.")
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "collStats", Value: "nope"}}).Err(), 26, "not found")
}

// explain reports the store's plan in the shape mongosh's .explain() reads.
func TestExplain(t *testing.T) {
	_, c := setup(t)
	db := c.Database("explain")
	coll := db.Collection("c")
	if _, err := coll.InsertMany(t.Context(), []any{bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "a", Value: 2}}, bson.D{{Key: "a", Value: 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cmd       bson.D
		stages    []string // the winning plan, outermost first
		nReturned int32
	}{
		"indexed find": {bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 2}}}}, []string{"FETCH", "IXSCAN"}, 1},
		"scan with sort and limit": {bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "b", Value: nil}}}, {Key: "sort", Value: bson.D{{Key: "b", Value: -1}}}, {Key: "limit", Value: 2}},
			[]string{"LIMIT", "SORT", "COLLSCAN"}, 2},
		"sort by the index": {bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "a", Value: -1}}}, {Key: "limit", Value: 2}},
			nil, 2},
		"count": {bson.D{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 2}}}}}}, []string{"COUNT", "FETCH", "IXSCAN"}, 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := run(t, db, bson.D{{Key: "explain", Value: tc.cmd}, {Key: "verbosity", Value: "executionStats"}})
			if ns := r.Lookup("queryPlanner", "namespace").StringValue(); ns != "explain.c" {
				t.Fatalf("namespace %q", ns)
			}
			var got []string
			for st := r.Lookup("queryPlanner", "winningPlan"); st.Type == bson.TypeEmbeddedDocument; st = st.Document().Lookup("inputStage") {
				got = append(got, st.Document().Lookup("stage").StringValue())
			}
			if tc.stages == nil { // the store may walk the index or sort: either way, a consistent plan
				if slices.Contains(got, "SORT") == slices.Contains(got, "IXSCAN") {
					t.Fatalf("winning plan %v: a SORT stage exactly when no index gives the order", got)
				}
				if slices.Contains(got, "IXSCAN") && !strings.Contains(r.Lookup("queryPlanner", "winningPlan").String(), `"direction": "backward"`) {
					t.Fatalf("winning plan %v walks a_1 for a descending sort, but not backward", r.Lookup("queryPlanner", "winningPlan"))
				}
			} else if strings.Join(got, ",") != strings.Join(tc.stages, ",") {
				t.Fatalf("winning plan %v, want %v", got, tc.stages)
			}
			if n := r.Lookup("executionStats", "nReturned").Int32(); n != tc.nReturned {
				t.Fatalf("nReturned %d, want %d", n, tc.nReturned)
			}
		})
	}
	for name, cmd := range map[string]bson.D{
		"explain command": {{Key: "explain", Value: bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 2}}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}}}}}}, {Key: "cursor", Value: bson.D{}}}}},
		"explain option": {{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 2}}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}}}}}}, {Key: "explain", Value: true}},
	} {
		r := run(t, db, cmd)
		stages, _ := r.Lookup("stages").Array().Values()
		if len(stages) != 2 || stages[0].Document().Lookup("$cursor", "queryPlanner", "winningPlan", "inputStage", "indexName").StringValue() != "a_1" ||
			stages[1].Document().Index(0).Key() != "$group" {
			t.Fatalf("%s: %v", name, r)
		}
	}
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "explain", Value: bson.D{{Key: "frob", Value: "c"}}}}).Err(), 59, "Explain failed due to unknown command: frob")
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}}}, {Key: "verbosity", Value: "loud"}}).Err(), 2, "verbosity")
}

// E11000 messages print the duplicate key as mongod prints BSON.
func TestDuplicateKeyMessage(t *testing.T) {
	_, c := setup(t)
	db := c.Database("dupmsg")
	oid, _ := bson.ObjectIDFromHex("65a000000000000000000001")
	tests := map[string]struct {
		doc  bson.D
		want string
	}{
		"numbers":      {bson.D{{Key: "a", Value: 1.5}, {Key: "b", Value: int64(7)}}, `{ a: 1.5, b: 7 }`},
		"whole double": {bson.D{{Key: "a", Value: 2.0}, {Key: "b", Value: int32(3)}}, `{ a: 2.0, b: 3 }`},
		"document":     {bson.D{{Key: "a", Value: bson.D{{Key: "z", Value: 1}, {Key: "y", Value: "s"}}}, {Key: "b", Value: bson.D{}}}, `{ a: { z: 1, y: "s" }, b: {} }`},
		"oid and date": {bson.D{{Key: "a", Value: oid}, {Key: "b", Value: bson.DateTime(0)}}, `{ a: ObjectId('65a000000000000000000001'), b: new Date(0) }`},
		"regex, bool":  {bson.D{{Key: "a", Value: true}, {Key: "b", Value: bson.Regex{Pattern: "re", Options: "i"}}}, `{ a: true, b: /re/i }`},
		"quote, ts":    {bson.D{{Key: "a", Value: `q"uote`}, {Key: "b", Value: bson.Timestamp{T: 1, I: 2}}}, `{ a: "q\"uote", b: Timestamp(1, 2) }`},
		"missing":      {bson.D{{Key: "c", Value: 1}}, `{ a: null, b: null }`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			coll := db.Collection(strings.ReplaceAll(name, " ", ""))
			if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}, Options: options.Index().SetUnique(true)}); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.InsertOne(t.Context(), tc.doc); err != nil {
				t.Fatal(err)
			}
			_, err := coll.InsertOne(t.Context(), tc.doc)
			want := "E11000 duplicate key error collection: dupmsg." + coll.Name() + " index: a_1_b_-1 dup key: " + tc.want
			var we mongo.WriteException
			if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Message != want {
				t.Fatalf("error %v, want %q", err, want)
			}
		})
	}
}

// $out replaces its target in one step, keeping the target's indexes; a
// failing $out leaves the target as it was and no temporary collection.
func TestAggregateOut(t *testing.T) {
	_, c := setup(t)
	db := c.Database("out")
	ctx := t.Context()
	if _, err := db.Collection("c").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "g", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "g", Value: 1}}, bson.D{{Key: "_id", Value: 3}, {Key: "g", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	target := db.Collection("t")
	if _, err := target.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := target.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	contents := func() string {
		cur, err := target.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(docs)
	}
	group := mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}, {{Key: "$out", Value: "t"}}}
	cur, err := db.Collection("c").Aggregate(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Next(ctx) {
		t.Fatalf("$out returned %v", cur.Current)
	}
	want := `[{"_id": {"$numberInt":"1"},"n": {"$numberInt":"2"}} {"_id": {"$numberInt":"2"},"n": {"$numberInt":"1"}}]`
	if got := contents(); got != want {
		t.Fatalf("target %s, want %s", got, want)
	}
	// Two results with the same _id: the target keeps its contents.
	_, err = db.Collection("c").Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "_id", Value: "$g"}}}}, {{Key: "$out", Value: "t"}}})
	wantCode(t, err, 11000, "E11000")
	if got := contents(); got != want {
		t.Fatalf("target after a failed $out %s, want %s", got, want)
	}
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(names); strings.Join(names, ",") != "c,t" {
		t.Fatalf("collections %v, want c and t only", names)
	}
	specs, err := target.Indexes().ListSpecifications(ctx)
	if err != nil || len(specs) != 2 || specs[1].Name != "n_1" {
		t.Fatalf("target indexes %v (%v), want _id_ and n_1", specs, err)
	}
	_, err = db.Collection("c").Aggregate(ctx, mongo.Pipeline{{{Key: "$out", Value: "t"}}, {{Key: "$match", Value: bson.D{}}}})
	wantCode(t, err, 40601, "$out can only be the final stage in the pipeline")
}

// A hint naming an existing index (by name or key pattern, any numeric
// direction type) or $natural is accepted.
func TestValidHints(t *testing.T) {
	_, c := setup(t)
	db := c.Database("hints")
	coll := db.Collection("c")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "a", Value: -1}}}); err != nil {
		t.Fatal(err)
	}
	for name, hint := range map[string]any{
		"name": "a_-1", "key": bson.D{{Key: "a", Value: -1}}, "key as double": bson.D{{Key: "a", Value: -1.0}},
		"id": bson.D{{Key: "_id", Value: 1}}, "natural": bson.D{{Key: "$natural", Value: -1}},
	} {
		n, err := coll.CountDocuments(t.Context(), bson.D{{Key: "a", Value: 1}}, options.Count().SetHint(hint))
		if err != nil || n != 1 {
			t.Errorf("hint %s: %d, %v", name, n, err)
		}
	}
	// A missing collection answers empty whatever the hint, as mongod.
	if err := db.Collection("nope").FindOne(t.Context(), bson.D{}, options.FindOne().SetHint("zz")).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("hint on a missing collection: %v", err)
	}
}

// The diagnostic commands mongosh helpers call answer in mongod's shape.
func TestDiagnosticCommands(t *testing.T) {
	_, c := setup(t)
	db := c.Database("diag")
	if _, err := db.Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	admin := c.Database("admin")
	r := run(t, db, bson.D{{Key: "validate", Value: "c"}})
	if !r.Lookup("valid").Boolean() || r.Lookup("nrecords").Int32() != 1 || r.Lookup("keysPerIndex", "_id_").Int32() != 1 {
		t.Fatalf("validate %v", r)
	}
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "validate", Value: "nope"}}).Err(), 26, "does not exist")
	if r := run(t, db, bson.D{{Key: "profile", Value: -1}}); r.Lookup("was").Int32() != 0 {
		t.Fatalf("profile %v", r)
	}
	wantCode(t, db.RunCommand(t.Context(), bson.D{{Key: "profile", Value: 2}}).Err(), 115, "profiling level 2")
	if r := run(t, db, bson.D{{Key: "usersInfo", Value: 1}}); len(r.Lookup("users").Array()) != 5 { // the empty array
		t.Fatalf("usersInfo %v", r)
	}
	if r := run(t, admin, bson.D{{Key: "currentOp", Value: 1}}); r.Lookup("inprog").Type != bson.TypeArray {
		t.Fatalf("currentOp %v", r)
	}
	cur, err := admin.Aggregate(t.Context(), mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{}}}})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Next(t.Context()) {
		t.Fatalf("$currentOp listed %v", cur.Current)
	}
	cur.Close(t.Context())
	_, err = db.Aggregate(t.Context(), mongo.Pipeline{{{Key: "$currentOp", Value: bson.D{}}}})
	wantCode(t, err, 73, "$currentOp must be run against the 'admin' database")
	if r := run(t, db, bson.D{{Key: "listCommands", Value: 1}}); r.Lookup("commands", "find", "adminOnly").Boolean() ||
		!r.Lookup("commands", "listDatabases", "adminOnly").Boolean() {
		t.Fatalf("listCommands %v", r)
	}
}

// $merge writes each result as whenMatched and whenNotMatched say.
func TestAggregateMerge(t *testing.T) {
	_, c := setup(t)
	db := c.Database("merge")
	ctx := t.Context()
	src, dst := db.Collection("src"), db.Collection("dst")
	if _, err := src.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "new1"}}, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: "new2"}}}); err != nil {
		t.Fatal(err)
	}
	reset := func() {
		dst.Drop(ctx)
		if _, err := dst.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "old"}, {Key: "keep", Value: true}}); err != nil {
			t.Fatal(err)
		}
	}
	merge := func(spec bson.D) error {
		_, err := src.Aggregate(ctx, mongo.Pipeline{{{Key: "$merge", Value: append(bson.D{{Key: "into", Value: "dst"}}, spec...)}}})
		return err
	}
	contents := func() string {
		cur, err := dst.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetProjection(bson.D{{Key: "_id", Value: 0}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(docs)
	}
	tests := map[string]struct {
		spec bson.D
		want string
		code int32
	}{
		"defaults":        {nil, `[{"v": "new1","keep": true} {"v": "new2"}]`, 0},
		"replace":         {bson.D{{Key: "whenMatched", Value: "replace"}}, `[{"v": "new1"} {"v": "new2"}]`, 0},
		"keepExisting":    {bson.D{{Key: "whenMatched", Value: "keepExisting"}}, `[{"v": "old","keep": true} {"v": "new2"}]`, 0},
		"discard":         {bson.D{{Key: "whenNotMatched", Value: "discard"}}, `[{"v": "new1","keep": true}]`, 0},
		"fail unmatched":  {bson.D{{Key: "whenNotMatched", Value: "fail"}}, "", 13113},
		"fail matched":    {bson.D{{Key: "whenMatched", Value: "fail"}}, "", 11000},
		"no unique index": {bson.D{{Key: "on", Value: "v"}}, "", 51183},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reset()
			err := merge(tc.spec)
			if tc.code != 0 {
				wantCode(t, err, tc.code, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := contents(); got != tc.want {
				t.Fatalf("target %s, want %s", got, tc.want)
			}
		})
	}

	// A database-level aggregate from $documents (and $listLocalSessions)
	// writes through $merge and $out too; whenMatched fail reports the
	// index's duplicate key, keyPattern and keyValue included.
	reset()
	_, err := db.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}},
		{{Key: "$merge", Value: bson.D{{Key: "into", Value: "dst"}, {Key: "whenMatched", Value: "fail"}}}},
	})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 11000 || !bytes.Contains(ce.Raw, []byte("keyPattern")) || !strings.Contains(ce.Message, "$merge failed due to a DuplicateKey error") {
		t.Fatalf("$documents + $merge whenMatched fail = %v, want 11000 with keyPattern", err)
	}
	if _, err := db.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "_id", Value: 7}, {Key: "v", Value: "doc"}}}}},
		{{Key: "$merge", Value: "dst"}},
	}); err != nil {
		t.Fatalf("$documents + $merge: %v", err)
	}
	if _, err := db.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{bson.D{{Key: "_id", Value: 8}}}}},
		{{Key: "$out", Value: "out"}},
	}); err != nil {
		t.Fatalf("$documents + $out: %v", err)
	}
	if got := contents(); got != `[{"v": "old","keep": true} {"v": "doc"}]` {
		t.Fatalf("target after $documents + $merge: %s", got)
	}
	if n, err := db.Collection("out").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("$documents + $out wrote %d documents (%v), want 1", n, err)
	}
}
