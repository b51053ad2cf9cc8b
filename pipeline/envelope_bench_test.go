package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// orderDoc is a typical order document of about 600 bytes, the document
// the MongoDB source's benchmarks insert.
func orderDoc(i int) bson.D {
	items := bson.A{}
	for j := range 4 {
		items = append(items, bson.D{{Key: "sku", Value: fmt.Sprintf("SKU-%05d", i*7+j)}, {Key: "qty", Value: j + 1}, {Key: "price", Value: 9.99 + float64(j)}})
	}
	return bson.D{
		{Key: "_id", Value: i},
		{Key: "customer", Value: bson.D{{Key: "name", Value: "Ada Lovelace"}, {Key: "email", Value: "ada@example.com"}, {Key: "tier", Value: "gold"}}},
		{Key: "items", Value: items},
		{Key: "total", Value: 123.45},
		{Key: "status", Value: "paid"},
		{Key: "note", Value: strings.Repeat("n", 120)},
		{Key: "created", Value: time.Unix(1700000000+int64(i), 0)},
	}
}

// insertEvents returns n insert events of order documents, with the
// fields the MongoDB source fills in from a change event.
func insertEvents(tb testing.TB, n int) []cdc.Event {
	tb.Helper()
	marshal := func(d bson.D) []byte {
		raw, err := bson.Marshal(d)
		if err != nil {
			tb.Fatal(err)
		}
		return raw
	}
	evs := make([]cdc.Event, n)
	for i := range evs {
		token := fmt.Sprintf("8265%012X2B022C0100296E5A1004%032X46645F69640029%04X0004", 1700000000+i, i, i)
		evs[i] = cdc.Event{
			Pos:          cdc.Position(`{"resume_token":{"_data":"` + token + `"}}`),
			Op:           cdc.OpInsert,
			Namespace:    "bench.orders",
			ClusterTime:  cdc.Timestamp{T: uint32(1700000000 + i), I: 1},
			WallTimeMS:   (1700000000 + int64(i)) * 1000,
			DocumentKey:  marshal(bson.D{{Key: "_id", Value: i}}),
			FullDocument: marshal(orderDoc(i)),
			ResumeToken:  marshal(bson.D{{Key: "_data", Value: token}}),
		}
	}
	return evs
}

// BenchmarkEncodePool feeds insert events of order documents straight
// through the ordered encode pool with the default envelope, in chunks of
// 256, alternating 1 and 2 workers in every iteration so that both see the
// same machine load: the decode work alone, without the batching and
// commit stages.
func BenchmarkEncodePool(b *testing.B) {
	const n = 20000
	events := insertEvents(b, n)
	var chunks []*chunk
	for i := 0; i < n; i += 256 {
		chunks = append(chunks, &chunk{Events: events[i:min(i+256, n)]})
	}
	run := func(workers int) time.Duration {
		in := make(chan *chunk, len(chunks))
		out := make(chan *chunk, len(chunks))
		for _, c := range chunks {
			in <- c
		}
		close(in)
		start := time.Now()
		if err := encodeOrdered(context.Background(), workers, encode.Envelope, in, out); err != nil {
			b.Fatal(err)
		}
		got := 0
		for c := range out {
			got += len(c.Records)
		}
		took := time.Since(start)
		if got != n {
			b.Fatalf("encoded %d records, want %d", got, n)
		}
		return took
	}
	var one, two time.Duration
	for b.Loop() {
		one += run(1)
		two += run(2)
	}
	b.ReportMetric(float64(n*b.N)/one.Seconds(), "w1_events/s")
	b.ReportMetric(float64(n*b.N)/two.Seconds(), "w2_events/s")
	b.ReportMetric(one.Seconds()/two.Seconds(), "speedup")
}
