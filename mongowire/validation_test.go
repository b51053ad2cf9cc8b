package mongowire_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// writeErrInfo returns the code and errInfo of the first write error of err.
func writeErrInfo(t *testing.T, err error) (int, bson.Raw) {
	t.Helper()
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return we.WriteErrors[0].Code, we.WriteErrors[0].Details
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && len(bwe.WriteErrors) > 0 {
		return bwe.WriteErrors[0].Code, bwe.WriteErrors[0].Details
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return int(ce.Code), ce.Raw
	}
	t.Fatalf("error = %v, want a write or command error", err)
	return 0, nil
}

func wantValidationFailure(t *testing.T, err error) bson.Raw {
	t.Helper()
	code, details := writeErrInfo(t, err)
	if code != 121 {
		t.Fatalf("code = %d (%v), want 121 DocumentValidationFailure", code, err)
	}
	if info, lerr := details.LookupErr("errInfo"); lerr == nil { // a command error's reply
		return info.Document()
	}
	if _, lerr := details.LookupErr("failingDocumentId"); lerr != nil {
		t.Fatalf("no errInfo in %v", details)
	}
	return details
}

func lookupStr(t *testing.T, d bson.Raw, path ...string) string {
	t.Helper()
	v, err := d.LookupErr(path...)
	if err != nil {
		t.Fatalf("%v has no %v", d, path)
	}
	s, ok := v.StringValueOK()
	if !ok {
		return v.String()
	}
	return s
}

func TestValidatorQueryOperators(t *testing.T) {
	_, c := setup(t)
	db := c.Database("v")
	ctx := t.Context()
	if err := db.CreateCollection(ctx, "items", options.CreateCollection().SetValidator(bson.D{{Key: "qty", Value: bson.D{{Key: "$gte", Value: 0}}}})); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("items")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "qty", Value: 5}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "qty", Value: -1}})
	info := wantValidationFailure(t, err)
	if id := info.Lookup("failingDocumentId"); id.AsInt64() != 2 {
		t.Errorf("failingDocumentId = %v, want 2", id)
	}
	if op, reason := lookupStr(t, info, "details", "operatorName"), lookupStr(t, info, "details", "reason"); op != "$gte" || reason != "comparison failed" {
		t.Errorf("details = %v, want $gte / comparison failed", info.Lookup("details"))
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}})
	if reason := lookupStr(t, wantValidationFailure(t, err), "details", "reason"); reason != "field was missing" {
		t.Errorf("reason = %q, want field was missing", reason)
	}

	// Updates, upserts and findAndModify are validated too.
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: -5}}}})
	wantValidationFailure(t, err)
	_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 9}}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: -5}}}}, options.UpdateOne().SetUpsert(true))
	wantValidationFailure(t, err)
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "qty", Value: -10}}}}).Err()
	wantValidationFailure(t, err)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "other", Value: 1}})
	wantValidationFailure(t, err)
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("count = %d after refused writes, want 1", n)
	}

	// Several clauses: mongod explains an implicit $and.
	if err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "items"}, {Key: "validator", Value: bson.D{
		{Key: "qty", Value: bson.D{{Key: "$gte", Value: 0}}}, {Key: "name", Value: bson.D{{Key: "$type", Value: "string"}}},
	}}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 4}, {Key: "qty", Value: 1}, {Key: "name", Value: 7}})
	info = wantValidationFailure(t, err)
	if op := lookupStr(t, info, "details", "operatorName"); op != "$and" {
		t.Errorf("operatorName = %q, want $and", op)
	}
	bad := info.Lookup("details", "clausesNotSatisfied").Array()
	vals, _ := bad.Values()
	if len(vals) != 1 || vals[0].Document().Lookup("index").AsInt64() != 1 ||
		lookupStr(t, vals[0].Document(), "details", "operatorName") != "$type" ||
		lookupStr(t, vals[0].Document(), "details", "consideredType") != "int" {
		t.Errorf("clausesNotSatisfied = %v, want the $type clause (index 1) with consideredType int", bad)
	}
}

func TestValidatorJSONSchema(t *testing.T) {
	_, c := setup(t)
	db := c.Database("v")
	ctx := t.Context()
	schema := bson.D{{Key: "$jsonSchema", Value: bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"name", "age"}},
		{Key: "properties", Value: bson.D{
			{Key: "name", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "maxLength", Value: 5}}},
			{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: 0}}},
			{Key: "tags", Value: bson.D{{Key: "bsonType", Value: "array"}, {Key: "items", Value: bson.D{{Key: "enum", Value: bson.A{"a", "b"}}}}}},
		}},
	}}}
	if err := db.CreateCollection(ctx, "people", options.CreateCollection().SetValidator(schema)); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("people")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "ann"}, {Key: "age", Value: int32(3)}, {Key: "tags", Value: bson.A{"a"}}}); err != nil {
		t.Fatal(err)
	}
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "name", Value: 12}})
	info := wantValidationFailure(t, err)
	if op := lookupStr(t, info, "details", "operatorName"); op != "$jsonSchema" {
		t.Fatalf("operatorName = %q, want $jsonSchema", op)
	}
	rules, _ := info.Lookup("details", "schemaRulesNotSatisfied").Array().Values()
	seen := map[string]bson.Raw{}
	for _, r := range rules {
		seen[lookupStr(t, r.Document(), "operatorName")] = r.Document()
	}
	req, ok := seen["required"]
	if !ok {
		t.Fatalf("schemaRulesNotSatisfied = %v, want a required rule", rules)
	}
	if missing, _ := req.Lookup("missingProperties").Array().Values(); len(missing) != 1 || missing[0].StringValue() != "age" {
		t.Errorf("missingProperties = %v, want [age]", missing)
	}
	props, ok := seen["properties"]
	if !ok {
		t.Fatalf("schemaRulesNotSatisfied = %v, want a properties rule", rules)
	}
	pn, _ := props.Lookup("propertiesNotSatisfied").Array().Values()
	if len(pn) != 1 || lookupStr(t, pn[0].Document(), "propertyName") != "name" {
		t.Fatalf("propertiesNotSatisfied = %v, want name", pn)
	}
	d0, _ := pn[0].Document().Lookup("details").Array().Values()
	if len(d0) != 1 || lookupStr(t, d0[0].Document(), "reason") != "type did not match" || lookupStr(t, d0[0].Document(), "consideredType") != "int" {
		t.Errorf("name details = %v, want type did not match / int", d0)
	}
	for _, doc := range []bson.D{
		{{Key: "name", Value: "toolongname"}, {Key: "age", Value: int32(1)}},
		{{Key: "name", Value: "bo"}, {Key: "age", Value: int32(-1)}},
		{{Key: "name", Value: "bo"}, {Key: "age", Value: int32(1)}, {Key: "tags", Value: bson.A{"a", "z"}}},
	} {
		_, err := coll.InsertOne(ctx, doc)
		wantValidationFailure(t, err)
	}
	// $jsonSchema is a query operator too.
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "required", Value: bson.A{"tags"}}}}})
	if err != nil || n != 1 {
		t.Fatalf("count with $jsonSchema = %d, %v; want 1", n, err)
	}
}

func TestValidatorLevelActionBypass(t *testing.T) {
	_, c := setup(t)
	db := c.Database("v")
	ctx := t.Context()
	coll := db.Collection("lv")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: -1}}}); err != nil {
		t.Fatal(err)
	}
	collMod := func(opts ...bson.E) {
		t.Helper()
		cmd := bson.D{{Key: "collMod", Value: "lv"}, {Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}}}}
		if err := db.RunCommand(ctx, append(cmd, opts...)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set := func(id, a int) error {
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: a}}}})
		return err
	}
	collMod(bson.E{Key: "validationLevel", Value: "moderate"})
	if err := set(2, -2); err != nil {
		t.Fatalf("moderate: updating an already invalid document: %v", err)
	}
	wantValidationFailure(t, set(1, -1))
	_, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: -1}})
	wantValidationFailure(t, err)

	collMod(bson.E{Key: "validationLevel", Value: "strict"})
	wantValidationFailure(t, set(2, -3))

	collMod(bson.E{Key: "validationAction", Value: "warn"})
	if err := set(1, -1); err != nil {
		t.Fatalf("warn: %v", err)
	}
	collMod(bson.E{Key: "validationAction", Value: "error"})

	// bypassDocumentValidation, on every write command.
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: -1}}, options.InsertOne().SetBypassDocumentValidation(true)); err != nil {
		t.Fatalf("insert with bypass: %v", err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: -9}}}}, options.UpdateOne().SetBypassDocumentValidation(true)); err != nil {
		t.Fatalf("update with bypass: %v", err)
	}
	if err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: -8}}}}, options.FindOneAndUpdate().SetBypassDocumentValidation(true)).Err(); err != nil {
		t.Fatalf("findAndModify with bypass: %v", err)
	}
	collMod(bson.E{Key: "validationLevel", Value: "off"})
	if err := set(1, -7); err != nil {
		t.Fatalf("level off: %v", err)
	}
}

func TestValidatorBadOptions(t *testing.T) {
	_, c := setup(t)
	db := c.Database("v")
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		opts bson.D
		code int32
		msg  string
	}{
		{"level", bson.D{{Key: "validationLevel", Value: "sometimes"}}, 2, "validationLevel"},
		{"action", bson.D{{Key: "validationAction", Value: "shout"}}, 2, "validationAction"},
		{"validator type", bson.D{{Key: "validator", Value: 5}}, 14, "validator"},
		{"unknown operator", bson.D{{Key: "validator", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$bogus", Value: 1}}}}}}, 2, "$bogus"},
		{"unknown keyword", bson.D{{Key: "validator", Value: bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "bogus", Value: 1}}}}}}, 9, "Unknown $jsonSchema keyword: bogus"},
		{"unsupported keyword", bson.D{{Key: "validator", Value: bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "format", Value: "x"}}}}}}, 9, "format"},
		{"bad bsonType", bson.D{{Key: "validator", Value: bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "bsonType", Value: "nope"}}}}}}, 2, "nope"},
		{"where", bson.D{{Key: "validator", Value: bson.D{{Key: "$where", Value: "true"}}}}, 224, "$where is not allowed in this context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := append(bson.D{{Key: "create", Value: "bad"}}, tc.opts...)
			wantCode(t, db.RunCommand(ctx, cmd).Err(), tc.code, tc.msg)
			cmd = append(bson.D{{Key: "collMod", Value: "bad"}}, tc.opts...)
			if err := db.RunCommand(ctx, cmd).Err(); err == nil {
				t.Fatal("collMod accepted it")
			}
		})
	}
}

// TestBypassDocumentValidationPrivilege: bypassDocumentValidation needs
// its own action, which dbAdmin grants and readWrite does not.
func TestBypassDocumentValidationPrivilege(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	ctx := t.Context()
	if err := root.Database("app").CreateCollection(ctx, "c", options.CreateCollection().SetValidator(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}})); err != nil {
		t.Fatal(err)
	}
	createUser(t, root, "app", "writer", "w-pw", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "app"}})
	createUser(t, root, "app", "owner", "o-pw", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "app"}}, bson.D{{Key: "role", Value: "dbAdmin"}, {Key: "db", Value: "app"}})
	bypass := options.InsertOne().SetBypassDocumentValidation(true)
	writer := mustConnectAs(t, s, "writer", "w-pw", "app", "").Database("app").Collection("c")
	_, err := writer.InsertOne(ctx, bson.D{{Key: "a", Value: -1}}, bypass)
	wantCode(t, err, 13, "not authorized")
	if _, err := writer.InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatalf("plain insert by readWrite: %v", err)
	}
	owner := mustConnectAs(t, s, "owner", "o-pw", "app", "").Database("app").Collection("c")
	if _, err := owner.InsertOne(ctx, bson.D{{Key: "a", Value: -1}}, bypass); err != nil {
		t.Fatalf("bypass by dbAdmin: %v", err)
	}
}

// TestValidatorOutAndMerge: $out keeps the target's validator and checks
// what it writes, as $merge does, unless the aggregate bypasses it.
func TestValidatorOutAndMerge(t *testing.T) {
	_, c := setup(t)
	db := c.Database("v")
	ctx := t.Context()
	if _, err := db.Collection("src").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: -1}}}); err != nil {
		t.Fatal(err)
	}
	for target, stage := range map[string]bson.D{
		"out":   {{Key: "$out", Value: "out"}},
		"merge": {{Key: "$merge", Value: bson.D{{Key: "into", Value: "merge"}}}},
	} {
		if err := db.CreateCollection(ctx, target, options.CreateCollection().SetValidator(bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 0}}}})); err != nil {
			t.Fatal(err)
		}
		_, err := db.Collection("src").Aggregate(ctx, bson.A{stage})
		wantCode(t, err, 121, "Document failed validation")
		if n, _ := db.Collection(target).CountDocuments(ctx, bson.D{}); n != 0 {
			t.Fatalf("%s holds %d documents after a refused write", target, n)
		}
		if _, err := db.Collection("src").Aggregate(ctx, bson.A{stage}, options.Aggregate().SetBypassDocumentValidation(true)); err != nil {
			t.Fatalf("%v with bypass: %v", stage, err)
		}
		if n, _ := db.Collection(target).CountDocuments(ctx, bson.D{}); n != 1 {
			t.Fatalf("%s holds %d documents, want 1", target, n)
		}
		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: target}})
		if err != nil || len(specs) != 1 || len(specs[0].Options.Lookup("validator").Value) == 0 {
			t.Fatalf("%s lost its validator: %v %v", target, specs, err)
		}
	}
}
