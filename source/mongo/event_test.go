package mongo

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestChangeEventNamespaceCache: events share the last namespace's string
// only when it is theirs.
func TestChangeEventNamespaceCache(t *testing.T) {
	var cache nsCache
	for i, ns := range []bson.D{
		{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}},
		{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}},
		{{Key: "db", Value: "shop"}},
		{{Key: "db", Value: "shop"}, {Key: "coll", Value: ""}},
		{{Key: "db", Value: "shop"}, {Key: "coll", Value: "other"}},
		{{Key: "db", Value: "sho"}, {Key: "coll", Value: "porders"}},
		{{Key: "db", Value: "shop"}},
	} {
		raw, err := bson.Marshal(bson.D{
			{Key: "_id", Value: bson.D{{Key: "_data", Value: "82AB"}}},
			{Key: "operationType", Value: "insert"},
			{Key: "ns", Value: ns},
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := changeEvent(raw, nil)
		got, err := changeEvent(raw, &cache)
		if err != nil {
			t.Fatal(err)
		}
		if got.Namespace != want.Namespace {
			t.Errorf("event %d (%v): namespace %q, want %q", i, ns, got.Namespace, want.Namespace)
		}
	}
}
