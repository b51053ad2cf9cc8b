package store

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

const benchDocs = 100_000

var (
	benchOnce  sync.Once
	benchStore *Store
)

// benchColl is a collection of 100k documents {_id: i, k: i, u: i, pad}
// with an index on k only, shared by the read benchmarks.
func benchColl(b *testing.B) *Store {
	benchOnce.Do(func() {
		s, err := Open(Config{})
		if err != nil {
			b.Fatal(err)
		}
		docs := make([]bson.Raw, 0, 1000)
		for i := range benchDocs {
			docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "u", Value: i}, {Key: "pad", Value: "some text of a typical document"}}))
			if len(docs) == cap(docs) {
				if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
					b.Fatal(errs[0].Err)
				}
				docs = docs[:0]
			}
		}
		if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: 1}}}}); err != nil {
			b.Fatal(err)
		}
		benchStore = s
	})
	return benchStore
}

func benchFind(b *testing.B, field string) {
	s := benchColl(b)
	filters := make([]bson.Raw, 1024)
	for i := range filters {
		filters[i] = raw(b, bson.D{{Key: field, Value: rand.IntN(benchDocs)}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		docs, err := s.Find(nsA, FindSpec{Filter: filters[i%len(filters)]})
		if err != nil || len(docs) != 1 {
			b.Fatalf("got %d docs, err %v", len(docs), err)
		}
		i++
	}
}

func BenchmarkFindByID(b *testing.B)      { benchFind(b, "_id") }
func BenchmarkFindIndexed(b *testing.B)   { benchFind(b, "k") }
func BenchmarkFindUnindexed(b *testing.B) { benchFind(b, "u") }

func BenchmarkInsert(b *testing.B) {
	s := openMem(b)
	doc := raw(b, bson.D{{Key: "k", Value: 1}, {Key: "pad", Value: "some text of a typical document"}})
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := s.Insert(nsA, []bson.Raw{doc}, true); len(errs) > 0 {
			b.Fatal(errs[0].Err)
		}
	}
}

func BenchmarkInsertDurable(b *testing.B) {
	s := openDir(b, b.TempDir(), nil)
	defer s.Close()
	doc := raw(b, bson.D{{Key: "k", Value: 1}, {Key: "pad", Value: "some text of a typical document"}})
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := s.Insert(nsA, []bson.Raw{doc}, true); len(errs) > 0 {
			b.Fatal(errs[0].Err)
		}
	}
}

// TestMemoryOverhead inserts documents and measures the heap the store
// keeps for them (documents, records, the _id index and the oplog) against
// their raw BSON size.
func TestMemoryOverhead(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MB; skipped with -short")
	}
	tests := map[string]struct {
		docs, pad int
		oplog     int64
	}{
		"200-byte documents, 16 MiB oplog": {200_000, 150, 16 << 20},
		"1 KiB documents, 16 MiB oplog":    {50_000, 1000, 16 << 20},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s, err := Open(Config{OplogBytes: tc.oplog})
			if err != nil {
				t.Fatal(err)
			}
			var rawBytes int
			pad := make([]byte, tc.pad)
			for i := range pad {
				pad[i] = 'a' + byte(i%26)
			}
			batch := make([]bson.Raw, 0, 100)
			for i := range tc.docs {
				d := raw(t, bson.D{{Key: "n", Value: i}, {Key: "s", Value: fmt.Sprintf("%x", i)}, {Key: "pad", Value: string(pad)}})
				rawBytes += len(d) + 17 // the _id the store adds
				batch = append(batch, d)
				if len(batch) == cap(batch) {
					s.Insert(nsA, batch, true)
					batch = batch[:0]
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			used := float64(after.HeapAlloc - before.HeapAlloc)
			ratio := used / float64(rawBytes)
			t.Logf("raw %d MB, heap %d MB, ratio %.2f", rawBytes>>20, int(used)>>20, ratio)
			if ratio > 2.5 {
				t.Errorf("heap is %.2f× the raw BSON size, want ≤ 2.5×", ratio)
			}
			if n, _ := s.Count(nsA, nil, 0, 0); n != int64(tc.docs) {
				t.Fatalf("count %d", n)
			}
			runtime.KeepAlive(s)
			s.Close()
		})
	}
}

func BenchmarkUpdateInc(b *testing.B) {
	s := benchColl(b)
	filters := make([]bson.Raw, 1024)
	for i := range filters {
		filters[i] = raw(b, bson.D{{Key: "_id", Value: rand.IntN(benchDocs)}})
	}
	update := rv(b, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := s.Update(nsA, UpdateSpec{Filter: filters[i%len(filters)], Update: update})
		if err != nil || res.Modified != 1 {
			b.Fatalf("%+v %v", res, err)
		}
		i++
	}
}

func BenchmarkGroup(b *testing.B) {
	s := benchColl(b)
	stages := []bson.Raw{raw(b, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$mod", Value: bson.A{"$u", 10}}}}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}})}
	for b.Loop() {
		out, err := s.Aggregate(nsA, stages, mql.Limits{})
		if err != nil || len(out) != 10 {
			b.Fatalf("%d groups, err %v", len(out), err)
		}
	}
}

// BenchmarkMixedParallel runs inserts, finds by _id and by an indexed
// field, and $inc updates from concurrent clients on one store.
func BenchmarkMixedParallel(b *testing.B) {
	s := openMem(b)
	docs := make([]bson.Raw, benchDocs/10)
	for i := range docs {
		docs[i] = raw(b, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}})
	}
	s.Insert(nsA, docs, true)
	s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: 1}}}})
	update := rv(b, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	b.SetParallelism(2) // 4 clients on 2 CPUs
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for i := 0; pb.Next(); i++ {
			key := r.IntN(len(docs))
			switch i % 4 {
			case 0:
				doc, _ := bson.Marshal(bson.D{{Key: "x", Value: i}})
				s.Insert(nsA, []bson.Raw{doc}, true)
			case 1:
				f, _ := bson.Marshal(bson.D{{Key: "_id", Value: key}})
				s.Find(nsA, FindSpec{Filter: f})
			case 2:
				f, _ := bson.Marshal(bson.D{{Key: "k", Value: key}})
				s.Find(nsA, FindSpec{Filter: f})
			case 3:
				f, _ := bson.Marshal(bson.D{{Key: "_id", Value: key}})
				s.Update(nsA, UpdateSpec{Filter: f, Update: update})
			}
		}
	})
}
