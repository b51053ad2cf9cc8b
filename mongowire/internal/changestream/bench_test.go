package changestream

import (
	"bytes"
	"runtime"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// oplogResident writes four times the oplog bound in 1 KiB documents,
// drops the collection so that only the oplog still holds them, and
// returns the heap the store keeps, measured after a GC.
func oplogResident(t testing.TB, bound int64) int64 {
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := heap()
	st, err := store.Open(store.Config{OplogBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ns := store.Namespace{DB: "bench", Coll: "resident"}
	pad := make([]byte, 1000)
	batch := make([]bson.Raw, 0, 100)
	for written := int64(0); written < 4*bound; {
		batch = batch[:0]
		for range 100 {
			d, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "pad", Value: pad}})
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, d)
			written += int64(len(d))
		}
		if _, errs := st.Insert(ns, batch, true); len(errs) > 0 {
			t.Fatal(errs[0].Err)
		}
	}
	if _, err := st.Drop(ns); err != nil {
		t.Fatal(err)
	}
	resident := heap() - before
	runtime.KeepAlive(st)
	return resident
}

// The oplog's resident memory stays within its bound plus 10%.
func TestOplogResidentWithinBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 32 MiB; skipped with -short")
	}
	const bound = 8 << 20
	got := oplogResident(t, bound)
	if got > bound*11/10 {
		t.Errorf("oplog holds %.1f MiB for a bound of %d MiB", float64(got)/(1<<20), bound>>20)
	}
	t.Logf("oplog resident %.2f MiB, bound %d MiB (%.2f×)", float64(got)/(1<<20), bound>>20, float64(got)/bound)
}

// BenchmarkOplogResident reports the oplog's resident size against its
// bound: go test ./mongowire/internal/changestream -run '^$' -bench OplogResident -benchtime 1x
func BenchmarkOplogResident(b *testing.B) {
	const bound = 16 << 20
	var got int64
	for range b.N {
		got = oplogResident(b, bound)
	}
	b.ReportMetric(float64(got)/(1<<20), "resident-MiB")
	b.ReportMetric(float64(got)/bound, "resident/bound")
}

// BenchmarkTokenKeyString encodes the resume token of an insert, as every
// change event's _id is built.
func BenchmarkTokenKeyString(b *testing.B) {
	id := bsoncore.NewDocumentBuilder().AppendInt32("_id", 123456).Build()
	tok := Token{ClusterTime: bson.Timestamp{T: 1700000000, I: 7}, Version: TokenVersion, Type: EventToken,
		UUID: bytes.Repeat([]byte{0xAB}, 16), EventID: eventID("insert", id, nil)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tok.encode(); err != nil {
			b.Fatal(err)
		}
	}
}
