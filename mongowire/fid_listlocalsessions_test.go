package mongowire_test

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// $listLocalSessions lists the sessions commands used, until endSessions.
func TestListLocalSessions(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	admin := c.Database("admin")
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	id := sess.ID().Lookup("id")
	_, want := id.Binary()
	if err := c.Database("lls").Collection("c").FindOne(mongo.NewSessionContext(ctx, sess), bson.D{}).Err(); err != nil && err != mongo.ErrNoDocuments {
		t.Fatal(err)
	}
	listed := func() (found bool) {
		t.Helper()
		vals, _ := run(t, admin, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$listLocalSessions", Value: bson.D{{Key: "allUsers", Value: true}}}},
			bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}, {Key: "lastUse", Value: 1}}}},
		}}, {Key: "cursor", Value: bson.D{}}}).Lookup("cursor", "firstBatch").Array().Values()
		for _, v := range vals {
			d := v.Document()
			if _, got := d.Lookup("_id", "id").Binary(); bytes.Equal(got, want) {
				if _, uid := d.Lookup("_id", "uid").Binary(); len(uid) != 32 || d.Lookup("lastUse").Type != bson.TypeDateTime {
					t.Fatalf("session record %s", d)
				}
				found = true
			}
		}
		return found
	}
	if !listed() {
		t.Fatal("the session that ran a find is not listed")
	}
	run(t, admin, bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: id}}}}})
	if listed() {
		t.Fatal("an ended session is still listed")
	}
	// Any database, as in mongod, but never a collection.
	if err := c.Database("lls").RunCommand(ctx, bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}).Err(); err != nil {
		t.Fatalf("$listLocalSessions on a database other than admin: %v", err)
	}
	err = c.Database("lls").RunCommand(ctx, bson.D{{Key: "aggregate", Value: "coll"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$listLocalSessions", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}).Err()
	wantCode(t, err, 73, "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection")
	sess.EndSession(ctx)
}
