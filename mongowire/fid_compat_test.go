package mongowire_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongod's lower-case aliases run the commands they stand for.
func TestCommandAliases(t *testing.T) {
	_, c := setup(t)
	db := c.Database("alias")
	if _, err := db.Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		db    *mongo.Database
		cmd   bson.D
		field string
	}{
		"buildinfo":     {c.Database("admin"), bson.D{{Key: "buildinfo", Value: 1}}, "version"},
		"dbstats":       {db, bson.D{{Key: "dbstats", Value: 1}}, "collections"},
		"collstats":     {db, bson.D{{Key: "collstats", Value: "c"}}, "count"},
		"findandmodify": {db, bson.D{{Key: "findandmodify", Value: "c"}, {Key: "query", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}}, "value"},
		"ismaster":      {db, bson.D{{Key: "ismaster", Value: 1}}, "ismaster"},
	} {
		t.Run(name, func(t *testing.T) {
			if r := run(t, tc.db, tc.cmd); r.Lookup(tc.field).Type == 0 {
				t.Fatalf("%s answered %s, without %s", name, r, tc.field)
			}
		})
	}
	var got bson.M
	if err := db.Collection("c").FindOne(t.Context(), bson.D{}).Decode(&got); err != nil || got["n"] != int32(2) {
		t.Fatalf("after findandmodify: %v, %v", got, err)
	}
}

// apiVersion, apiStrict and apiDeprecationErrors are checked as mongod
// 7.0 checks them, and a client declaring the Stable API works.
func TestAPIParameters(t *testing.T) {
	s, c := setup(t)
	db := c.Database("api")
	for name, tc := range map[string]struct {
		cmd  bson.D
		code int32
		msg  string
	}{
		"version 2":          {bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "2"}}, 322, `API version must be "1"`},
		"version type":       {bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: 1}}, 14, "BSON field 'apiVersion' is the wrong type 'int', expected type 'string'"},
		"strict without":     {bson.D{{Key: "ping", Value: 1}, {Key: "apiStrict", Value: true}}, 4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion"},
		"deprecation alone":  {bson.D{{Key: "ping", Value: 1}, {Key: "apiDeprecationErrors", Value: false}}, 4886600, "without passing apiVersion"},
		"strict outside v1":  {bson.D{{Key: "serverStatus", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: true}}, 323, "Provided apiStrict:true, but the command serverStatus is not in API Version 1"},
		"strict type":        {bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: 1}}, 14, "BSON field 'apiStrict' is the wrong type 'int', expected type 'bool'"},
		"strict in v1":       {bson.D{{Key: "ping", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: true}}, -1, ""},
		"not strict outside": {bson.D{{Key: "serverStatus", Value: 1}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: false}}, -1, ""},
		"strict stage outside v1": {bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}}},
			{Key: "cursor", Value: bson.D{}}, {Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: true}}, 323, "$listLocalSessions is not allowed with 'apiStrict: true' in API Version 1"},
		"stage outside v1 not strict": {bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}}},
			{Key: "cursor", Value: bson.D{}}, {Key: "apiVersion", Value: "1"}}, -1, ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := db.RunCommand(t.Context(), tc.cmd).Err()
			switch tc.code {
			case -1:
				if err != nil {
					t.Fatal(err)
				}
			default:
				wantCode(t, err, tc.code, tc.msg)
			}
		})
	}
	// The driver's Stable API option: strict CRUD works.
	api := options.ServerAPI(options.ServerAPIVersion1).SetStrict(true).SetDeprecationErrors(true)
	sc, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetServerAPIOptions(api))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Disconnect(t.Context())
	coll := sc.Database("api").Collection("c")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := coll.CountDocuments(t.Context(), bson.D{}); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
}

// Search index commands answer as a mongod without Atlas Search.
func TestSearchIndexCommands(t *testing.T) {
	_, c := setup(t)
	coll := c.Database("search").Collection("c")
	const msg = "requires additional configuration"
	const errSearchPrefix = "Using Atlas Search Database Commands"
	_, err := coll.SearchIndexes().CreateOne(t.Context(), mongo.SearchIndexModel{Definition: bson.D{{Key: "mappings", Value: bson.D{{Key: "dynamic", Value: true}}}}})
	wantCode(t, err, 31082, msg)
	// DropOne and UpdateOne hand back the driver's own error type.
	for name, err := range map[string]error{
		"dropSearchIndex":   coll.SearchIndexes().DropOne(t.Context(), "x"),
		"updateSearchIndex": coll.SearchIndexes().UpdateOne(t.Context(), "x", bson.D{}),
	} {
		if err == nil || !strings.Contains(err.Error(), "(SearchNotEnabled) "+errSearchPrefix) {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err = coll.SearchIndexes().List(t.Context(), nil)
	wantCode(t, err, 31082, msg)
}
