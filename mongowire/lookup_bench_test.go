package mongowire_test

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/internal/testenv"
)

// BenchmarkLookupJoin joins 10k orders with 10k items through the
// official driver ($lookup localField/foreignField, one match each) and
// reads the whole result. peak-heap-MB is the peak of the process's heap
// in use during the runs, above its level before them (the server runs in
// this process).
func BenchmarkLookupJoin(b *testing.B) {
	client := testenv.MongoClient(b, testenv.MongoWire(b).URI())
	db := client.Database("bench")
	const n = 10000
	orders, items := make([]any, n), make([]any, n)
	for i := range n {
		orders[i] = bson.D{{Key: "_id", Value: i}, {Key: "item", Value: i}, {Key: "qty", Value: i % 7}, {Key: "note", Value: "an order of some length"}}
		items[i] = bson.D{{Key: "_id", Value: i}, {Key: "name", Value: "item name of some length"}, {Key: "price", Value: float64(i) / 100}}
	}
	for _, c := range []struct {
		coll *mongo.Collection
		docs []any
	}{{db.Collection("orders"), orders}, {db.Collection("items"), items}} {
		if _, err := c.coll.InsertMany(b.Context(), c.docs); err != nil {
			b.Fatal(err)
		}
	}
	pipeline := bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "localField", Value: "item"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "i"}}}}}

	stop := sampleHeap(5 * time.Millisecond)
	b.ResetTimer()
	for b.Loop() {
		cur, err := db.Collection("orders").Aggregate(b.Context(), pipeline)
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for cur.Next(b.Context()) {
			got++
		}
		if err := cur.Err(); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("got %d documents, want %d", got, n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(stop())/(1<<20), "peak-heap-MB")
}

// BenchmarkLookupCount is issue 25's probe, scaled down: a self-$lookup
// of 500 documents of 2 KiB (1 MiB), each joined with the whole
// collection, then $count. Materialised, the joined documents are 500
// MiB; streamed, one at a time.
func BenchmarkLookupCount(b *testing.B) {
	client := testenv.MongoClient(b, testenv.MongoWire(b).URI())
	coll := client.Database("bench").Collection("c")
	const n = 500
	docs := make([]any, n)
	pad := strings.Repeat("p", 2000)
	for i := range n {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}
	}
	if _, err := coll.InsertMany(b.Context(), docs); err != nil {
		b.Fatal(err)
	}
	pipeline := bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "all"}}}},
		bson.D{{Key: "$count", Value: "n"}},
	}
	stop := sampleHeap(5 * time.Millisecond)
	b.ResetTimer()
	for b.Loop() {
		var out []bson.M
		cur, err := coll.Aggregate(b.Context(), pipeline)
		if err == nil {
			err = cur.All(b.Context(), &out)
		}
		if err != nil {
			b.Fatal(err)
		}
		if len(out) != 1 {
			b.Fatalf("got %v", out)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(stop())/(1<<20), "peak-heap-MB")
}
