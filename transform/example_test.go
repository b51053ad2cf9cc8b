package transform_test

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/transform"
)

// A chain of a filter, a drop, a set, a route and a Go function, applied
// to one change, as the encode stage applies it to each.
func Example() {
	chain, err := transform.Compile([]transform.Step{
		{Filter: &transform.Filter{Ops: []string{"insert"}, Where: `doc.status != "draft"`}},
		{DropFields: []string{"password"}},
		{Set: []transform.Field{{Path: "region", Value: `doc.country in ["DE", "FR"] ? "eu" : "other"`}}},
		{Route: `"orders_" + doc.region`},
		{FuncName: "shout", Func: func(ev *cdc.Event) (bool, error) {
			ev.Route += "!"
			return true, nil
		}},
	}, transform.Options{})
	if err != nil {
		panic(err)
	}
	doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: 1}, {Key: "status", Value: "paid"}, {Key: "country", Value: "FR"}, {Key: "password", Value: "x"}})
	ev := cdc.Event{Op: cdc.OpInsert, Namespace: "shop.orders", FullDocument: doc}
	keep, err := chain.Apply(&ev)
	if err != nil {
		panic(err)
	}
	out, _ := encode.AppendRelaxed(nil, ev.FullDocument)
	fmt.Println(keep, ev.Route, string(out))
	// Output: true orders_eu! {"_id":1,"status":"paid","country":"FR","region":"eu"}
}
