package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// An empty Timestamp(0, 0) at the top of an inserted document becomes the
// current cluster time, as in mongod, unless bypassEmptyTsReplacement is
// set (mongorestore's way of restoring such values as they were); nested
// ones and _id are kept.
func TestInsertEmptyTimestamp(t *testing.T) {
	_, c := setup(t)
	db := c.Database("ts")
	empty := bson.Timestamp{}
	doc := func(id int) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "ts", Value: empty}, {Key: "sub", Value: bson.D{{Key: "ts", Value: empty}}}, {Key: "after", Value: 1}}
	}
	before := run(t, db, bson.D{{Key: "ping", Value: 1}}).Lookup("operationTime")
	run(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(1)}}})
	run(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc(2)}}, {Key: "bypassEmptyTsReplacement", Value: true}})
	run(t, db, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: empty}}}}})

	get := func(id any) bson.Raw {
		t.Helper()
		r, err := db.Collection("c").FindOne(t.Context(), bson.D{{Key: "_id", Value: id}}).Raw()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bt, bi := before.Timestamp()
	d := get(1)
	tt, ti := d.Lookup("ts").Timestamp()
	if tt < bt || tt == bt && ti <= bi {
		t.Errorf("replaced ts = Timestamp(%d, %d), want after the cluster time %d,%d", tt, ti, bt, bi)
	}
	if st, si := d.Lookup("sub", "ts").Timestamp(); st != 0 || si != 0 {
		t.Errorf("nested ts replaced: %s", d)
	}
	if keys, _ := d.Elements(); len(keys) != 4 || keys[3].Key() != "after" {
		t.Errorf("field order changed: %s", d)
	}
	if tt, ti := get(2).Lookup("ts").Timestamp(); tt != 0 || ti != 0 {
		t.Errorf("bypassEmptyTsReplacement: ts = Timestamp(%d, %d), want it kept empty", tt, ti)
	}
	get(empty) // _id is never replaced
}
