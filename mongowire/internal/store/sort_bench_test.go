package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// sortColl is a collection of 100k documents {_id: i, r, s, pad} where r
// and s are random; s is indexed, r is not. The store is closed when the
// benchmark ends.
func sortColl(b *testing.B) *Store {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	rnd := rand.New(rand.NewPCG(1, 2))
	docs := make([]bson.Raw, 0, 1000)
	for i := range benchDocs {
		docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "r", Value: rnd.IntN(benchDocs)}, {Key: "s", Value: rnd.IntN(benchDocs)}, {Key: "pad", Value: "some text of a typical document"}}))
		if len(docs) == cap(docs) {
			if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
				b.Fatal(errs[0].Err)
			}
			docs = docs[:0]
		}
	}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "s", Value: 1}}}}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkFindSorted sorts 100k documents through Find: on an unindexed
// field (a scan, then a sort or a top-k) and on an indexed one (an index
// walk when the store uses one), with and without a limit.
func BenchmarkFindSorted(b *testing.B) {
	s := sortColl(b)
	tests := []struct {
		name  string
		sort  bson.D
		limit int64
	}{
		{"unindexed/all", bson.D{{Key: "r", Value: 1}}, 0},
		{"unindexed/limit10", bson.D{{Key: "r", Value: 1}}, 10},
		{"unindexed/limit1000", bson.D{{Key: "r", Value: 1}}, 1000},
		{"indexed/all", bson.D{{Key: "s", Value: 1}}, 0},
		{"indexed/limit10", bson.D{{Key: "s", Value: 1}}, 10},
		{"indexed-reverse/limit10", bson.D{{Key: "s", Value: -1}}, 10},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			spec := FindSpec{Sort: raw(b, tc.sort), Limit: tc.limit}
			want := tc.limit
			if want == 0 {
				want = benchDocs
			}
			for b.Loop() {
				docs, err := s.Find(nsA, spec)
				if err != nil || int64(len(docs)) != want {
					b.Fatalf("got %d docs, err %v", len(docs), err)
				}
			}
		})
	}
}

// BenchmarkSortDocs compares ways of sorting 100k documents in memory on a
// random field: the stable sort with Sort.Compare the store used before,
// mql's SortDocs, and the top-k heap for a limit.
func BenchmarkSortDocs(b *testing.B) {
	s := sortColl(b)
	all, err := s.Find(nsA, FindSpec{})
	if err != nil {
		b.Fatal(err)
	}
	sorter, err := mql.CompileSort(raw(b, bson.D{{Key: "r", Value: 1}}))
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]bson.Raw, len(all))
	b.Run("SliceStable+Compare", func(b *testing.B) {
		for b.Loop() {
			copy(docs, all)
			sort.SliceStable(docs, func(i, j int) bool { return sorter.Compare(docs[i], docs[j]) < 0 })
		}
	})
	b.Run("SortDocs", func(b *testing.B) {
		for b.Loop() {
			copy(docs, all)
			sorter.SortDocs(docs)
		}
	})
	for _, k := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("topK/%d", k), func(b *testing.B) {
			for b.Loop() {
				copy(docs, all)
				if got := topK(docs, k, sorter.Compare); len(got) != k {
					b.Fatal(len(got))
				}
			}
		})
	}
	// The two must agree.
	copy(docs, all)
	sorter.SortDocs(docs)
	want := slices.Clone(docs)
	copy(docs, all)
	sort.SliceStable(docs, func(i, j int) bool { return sorter.Compare(docs[i], docs[j]) < 0 })
	for i := range docs {
		if string(docs[i]) != string(want[i]) {
			b.Fatalf("SortDocs and SliceStable differ at %d", i)
		}
	}
}
