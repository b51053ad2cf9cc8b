package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestViews(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	db := c.Database("vw")
	src := db.Collection("orders")
	if _, err := src.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "a"}, {Key: "qty", Value: 5}, {Key: "secret", Value: "x"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "b"}, {Key: "qty", Value: 0}},
		bson.D{{Key: "_id", Value: 3}, {Key: "item", Value: "a"}, {Key: "qty", Value: 7}},
	}); err != nil {
		t.Fatal(err)
	}
	cs, err := db.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetShowExpandedEvents(true))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	pipeline := bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 0}}}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "secret", Value: 0}}}},
	}
	if err := db.CreateView(ctx, "instock", "orders", pipeline); err != nil {
		t.Fatal(err)
	}
	// A view on the view.
	if err := db.CreateView(ctx, "instockA", "instock", bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: "a"}}}}}); err != nil {
		t.Fatal(err)
	}
	view := db.Collection("instock")

	cur, err := view.Find(ctx, bson.D{{Key: "item", Value: "a"}}, options.Find().SetSort(bson.D{{Key: "qty", Value: -1}}).SetLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.M
	if err := cur.All(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["_id"] != int32(3) || got[0]["secret"] != nil {
		t.Fatalf("find on the view = %v, want _id 3 without secret", got)
	}
	if n, err := view.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("countDocuments on the view = %d, %v; want 2", n, err)
	}
	var cnt struct {
		N int `bson:"n"`
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "count", Value: "instock"}}).Decode(&cnt); err != nil || cnt.N != 2 {
		t.Fatalf("count on the view = %d, %v; want 2", cnt.N, err)
	}
	var distinct []string
	if err := view.Distinct(ctx, "item", bson.D{}).Decode(&distinct); err != nil || len(distinct) != 1 || distinct[0] != "a" {
		t.Fatalf("distinct on the view = %v, %v; want [a]", distinct, err)
	}
	if n, err := db.Collection("instockA").CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("count on the view of the view = %d, %v", n, err)
	}
	agg, err := view.Aggregate(ctx, mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$qty"}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var sums []bson.M
	if err := agg.All(ctx, &sums); err != nil || len(sums) != 1 || sums[0]["total"] != int32(12) {
		t.Fatalf("aggregate on the view = %v, %v; want total 12", sums, err)
	}
	// $lookup from a view.
	lk, err := src.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: "_id", Value: 2}}}},
		{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "instock"}, {Key: "localField", Value: "item"}, {Key: "foreignField", Value: "item"}, {Key: "as", Value: "same"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var lks []bson.M
	if err := lk.All(ctx, &lks); err != nil || len(lks) != 1 || len(lks[0]["same"].(bson.A)) != 0 {
		t.Fatalf("$lookup from the view = %v, %v", lks, err)
	}

	// listCollections.
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "instock"}})
	if err != nil || len(specs) != 1 {
		t.Fatalf("listCollections: %v %v", specs, err)
	}
	if specs[0].Type != "view" || !specs[0].ReadOnly || specs[0].Options.Lookup("viewOn").StringValue() != "orders" {
		t.Fatalf("listCollections entry = %+v, want a read-only view on orders", specs[0])
	}

	// Writes are refused.
	_, err = view.InsertOne(ctx, bson.D{{Key: "qty", Value: 1}})
	wantCode(t, err, 166, "is a view, not a collection")
	_, err = view.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "qty", Value: 1}}}})
	wantCode(t, err, 166, "is a view, not a collection")
	_, err = view.DeleteMany(ctx, bson.D{})
	wantCode(t, err, 166, "is a view, not a collection")
	_, err = view.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "qty", Value: 1}}})
	wantCode(t, err, 166, "is a view, not a collection")
	wantCode(t, db.CreateView(ctx, "bad", "orders", bson.A{bson.D{{Key: "$out", Value: "x"}}}), 167, "$out cannot be used in a view definition")
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "bad"}, {Key: "viewOn", Value: "orders"}, {Key: "capped", Value: true}}).Err(), 72, "capped")
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "bad"}, {Key: "pipeline", Value: bson.A{}}}).Err(), 2, "'pipeline' requires 'viewOn'")
	wantCode(t, db.RunCommand(ctx, bson.D{{Key: "create", Value: "bad"}, {Key: "viewOn", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$nope", Value: 1}}}}}).Err(), 40324, "$nope")

	// The change stream reports the create of the view with its definition.
	for cs.Next(ctx) {
		if cs.Current.Lookup("operationType").StringValue() != "create" {
			continue
		}
		desc := cs.Current.Lookup("operationDescription").Document()
		if desc.Lookup("viewOn").StringValue() != "orders" {
			t.Fatalf("create event = %v, want operationDescription.viewOn orders", cs.Current)
		}
		if _, err := desc.LookupErr("idIndex"); err == nil {
			t.Fatalf("create event of a view has an idIndex: %v", cs.Current)
		}
		break
	}
	if err := view.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if names, _ := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: "instock"}}); len(names) != 0 {
		t.Fatalf("view still listed after drop: %v", names)
	}
}
