package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Command-level let reaches $expr filters, projections, pipelines and
// pipeline-style updates of every CRUD command, and a modifier update
// keeps "$$name" as a plain string, as mongod does.
func TestCommandLet(t *testing.T) {
	_, c := setup(t)
	db := c.Database("let")
	coll := db.Collection("c")
	ctx := t.Context()
	reset := func(t *testing.T) {
		t.Helper()
		if err := coll.Drop(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: 2}}, bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 3}}}); err != nil {
			t.Fatal(err)
		}
	}
	let := bson.D{{Key: "target", Value: 2}, {Key: "label", Value: "two"}}
	byLet := bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$n", "$$target"}}}}}
	all := func(t *testing.T) func(*mongo.Cursor, error) []bson.M {
		return func(cur *mongo.Cursor, err error) []bson.M {
			if err != nil {
				t.Fatal(err)
			}
			var out []bson.M
			if err := cur.All(ctx, &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}

	t.Run("find", func(t *testing.T) {
		reset(t)
		got := all(t)(coll.Find(ctx, byLet, options.Find().SetLet(let).SetProjection(bson.D{{Key: "l", Value: "$$label"}})))
		if len(got) != 1 || got[0]["_id"] != int32(2) || got[0]["l"] != "two" {
			t.Fatalf("find = %v, want [{_id: 2, l: two}]", got)
		}
		// Under $or too.
		got = all(t)(coll.Find(ctx, bson.D{{Key: "$or", Value: bson.A{byLet, bson.D{{Key: "n", Value: 3}}}}}, options.Find().SetLet(let)))
		if len(got) != 2 {
			t.Fatalf("find $or = %v, want 2 documents", got)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		reset(t)
		pipe := mongo.Pipeline{{{Key: "$match", Value: byLet}}, {{Key: "$project", Value: bson.D{{Key: "l", Value: "$$label"}}}}}
		got := all(t)(coll.Aggregate(ctx, pipe, options.Aggregate().SetLet(let)))
		if len(got) != 1 || got[0]["l"] != "two" {
			t.Fatalf("aggregate = %v", got)
		}
	})
	t.Run("update", func(t *testing.T) {
		reset(t)
		res, err := coll.UpdateMany(ctx, byLet, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "l", Value: "$$label"}}}}}, options.UpdateMany().SetLet(let))
		if err != nil || res.ModifiedCount != 1 {
			t.Fatalf("update = %+v, %v", res, err)
		}
		// A modifier update takes no variables: the string is stored as is.
		if _, err := coll.UpdateOne(ctx, byLet, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: "$$label"}}}}, options.UpdateOne().SetLet(let)); err != nil {
			t.Fatal(err)
		}
		var got bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&got); err != nil || got["l"] != "two" || got["m"] != "$$label" {
			t.Fatalf("after updates: %v, %v", got, err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		reset(t)
		res, err := coll.DeleteMany(ctx, byLet, options.DeleteMany().SetLet(let))
		if err != nil || res.DeletedCount != 1 {
			t.Fatalf("delete = %+v, %v", res, err)
		}
	})
	t.Run("findAndModify", func(t *testing.T) {
		reset(t)
		var got bson.M
		err := coll.FindOneAndUpdate(ctx, byLet, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "l", Value: "$$label"}}}}},
			options.FindOneAndUpdate().SetLet(let).SetReturnDocument(options.After)).Decode(&got)
		if err != nil || got["_id"] != int32(2) || got["l"] != "two" {
			t.Fatalf("findAndModify = %v, %v", got, err)
		}
	})
	t.Run("bulkWrite", func(t *testing.T) {
		reset(t)
		res, err := coll.BulkWrite(ctx, []mongo.WriteModel{
			mongo.NewUpdateOneModel().SetFilter(byLet).SetUpdate(mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "l", Value: "$$label"}}}}}),
			mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "$expr", Value: bson.D{{Key: "$gt", Value: bson.A{"$n", "$$target"}}}}}),
		}, options.BulkWrite().SetLet(let))
		if err != nil || res.ModifiedCount != 1 || res.DeletedCount != 1 {
			t.Fatalf("bulkWrite = %+v, %v", res, err)
		}
	})
	t.Run("bad let", func(t *testing.T) {
		err := db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "let", Value: 1}}).Err()
		wantCode(t, err, 14, "BSON field 'find.let' is the wrong type 'int', expected type 'object'")
		err = db.RunCommand(ctx, bson.D{{Key: "find", Value: "c"}, {Key: "let", Value: bson.D{{Key: "Bad", Value: 1}}}}).Err()
		wantCode(t, err, 16867, "'Bad' starts with an invalid character for a user variable name")
	})
}
