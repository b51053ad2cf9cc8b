package transform

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// kibChange is an insert of a 1 KiB order document.
func kibChange(b *testing.B) cdc.Event {
	items := bson.A{}
	for j := range 4 {
		items = append(items, bson.D{{Key: "sku", Value: "SKU-0000" + string(rune('0'+j))}, {Key: "qty", Value: int32(j + 1)}, {Key: "price", Value: 9.99 + float64(j)}})
	}
	doc := bson.D{
		{Key: "_id", Value: int32(42)},
		{Key: "customer", Value: bson.D{{Key: "name", Value: "Ada Lovelace"}, {Key: "email", Value: "ada@example.com"}, {Key: "tier", Value: "gold"}}},
		{Key: "items", Value: items},
		{Key: "total", Value: 123.45},
		{Key: "status", Value: "paid"},
		{Key: "password", Value: "hunter2"},
		{Key: "created", Value: bson.NewDateTimeFromTime(time.Unix(1700000000, 0))},
	}
	raw, _ := bson.Marshal(doc)
	doc = append(doc, bson.E{Key: "note", Value: strings.Repeat("n", 1024-len(raw)-12)})
	full, _ := bson.Marshal(doc)
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(42)}})
	return cdc.Event{Pos: cdc.Position(`{"n":1}`), Op: cdc.OpInsert, Namespace: "shop.orders", DocumentKey: key, FullDocument: full}
}

// BenchmarkFilterWhere evaluates a CEL filter on a change with a 1 KiB
// document.
func BenchmarkFilterWhere(b *testing.B) {
	c, err := Compile([]Step{{Filter: &Filter{Where: `doc.status != "draft" && doc.total > 100.0 && doc.customer.tier == "gold"`}}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ev := kibChange(b)
	evs := make([]cdc.Event, 1)
	b.ReportAllocs()
	for b.Loop() {
		evs[0] = ev
		if keep, err := c.Apply(&evs[0]); !keep || err != nil {
			b.Fatal(keep, err)
		}
	}
}

// BenchmarkDropOneField encodes the 1 KiB change (the default envelope)
// with no transform, and after a drop_fields of one field, alternating
// in rounds; ratio is the throughput with the drop over the one
// without.
func BenchmarkDropOneField(b *testing.B) {
	benchAgainstNone(b, []Step{{DropFields: []string{"password"}}})
}

// BenchmarkFiveTransforms is BenchmarkDropOneField with filter, drop,
// rename, mask and set.
func BenchmarkFiveTransforms(b *testing.B) {
	benchAgainstNone(b, []Step{
		{Filter: &Filter{Ops: []string{"insert", "update"}, Where: `doc.status != "draft"`}},
		{DropFields: []string{"password"}},
		{RenameFields: []Field{{Path: "total", Value: "amount"}}},
		{MaskFields: []Field{{Path: "customer.email", Value: "hash"}}},
		{Set: []Field{{Path: "region", Value: `doc.customer.tier == "gold" ? "eu" : "other"`}}},
	})
}

func benchAgainstNone(b *testing.B, steps []Step) {
	c, err := Compile(steps, Options{MaskKey: []byte("k")})
	if err != nil {
		b.Fatal(err)
	}
	ev := kibChange(b)
	buf := make([]byte, 0, 4096)
	const round = 2000
	// The changes live in a slice, as the encode stage's chunks hold them.
	evs := make([]cdc.Event, round)
	docs := make([][]byte, round) // each change owns its document, as from a source
	for i := range docs {
		docs[i] = make([]byte, len(ev.FullDocument))
	}
	var none, with time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i := range evs {
			evs[i] = ev
			evs[i].FullDocument = docs[i][:copy(docs[i], ev.FullDocument)]
		}
		t0 := time.Now()
		for i := range evs {
			buf, _ = encode.Envelope(buf[:0], &evs[i])
		}
		t1 := time.Now()
		for i := range evs {
			if keep, err := c.Apply(&evs[i]); !keep || err != nil {
				b.Fatal(keep, err)
			}
			buf, _ = encode.Envelope(buf[:0], &evs[i])
		}
		with += time.Since(t1)
		none += t1.Sub(t0)
	}
	n := float64(b.N * round)
	b.ReportMetric(float64(none.Nanoseconds())/n, "none_ns/change")
	b.ReportMetric(float64(with.Nanoseconds())/n, "with_ns/change")
	b.ReportMetric(float64(none)/float64(with), "ratio")
}
