package mql

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// benchDoc is a document of about 1 KiB.
func benchDoc(i int) bson.Raw {
	d, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "name", Value: fmt.Sprintf("user-%d", i)},
		{Key: "cat", Value: fmt.Sprintf("c%d", i%100)},
		{Key: "n", Value: int32(i % 1000)},
		{Key: "score", Value: float64(i%97) / 3},
		{Key: "tags", Value: bson.A{"a", "b", fmt.Sprintf("t%d", i%10)}},
		{Key: "nested", Value: bson.D{{Key: "x", Value: int64(i % 10)}, {Key: "y", Value: "why"}}},
		{Key: "pad", Value: strings.Repeat("p", 800)},
	})
	if err != nil {
		panic(err)
	}
	return d
}

var (
	corpusOnce sync.Once
	corpus     []bson.Raw // 100k documents of about 1 KiB
)

func benchCorpus() []bson.Raw {
	corpusOnce.Do(func() {
		corpus = make([]bson.Raw, 100_000)
		for i := range corpus {
			corpus[i] = benchDoc(i)
		}
	})
	return corpus
}

func BenchmarkMatch(b *testing.B) {
	docs := benchCorpus()[:1000]
	filters := map[string]string{
		"eq":          `{"n": 500}`,
		"range":       `{"score": {"$gte": 10, "$lt": 20}}`,
		"in":          `{"cat": {"$in": ["c1", "c2", "c3"]}}`,
		"dotted":      `{"nested.x": {"$gt": 5}}`,
		"array elem":  `{"tags": "t3"}`,
		"and of four": `{"n": {"$gt": 10}, "cat": "c5", "nested.x": 5, "tags": {"$size": 3}}`,
	}
	for name, fs := range filters {
		f, err := CompileFilter(doc(b, fs))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for i := 0; b.Loop(); i++ {
				if f.Match(docs[i%len(docs)]) {
					n++
				}
			}
		})
	}
	// Baseline: what decoding each document into a map costs, before any
	// predicate is even evaluated.
	b.Run("baseline unmarshal to map", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var m bson.M
			if err := bson.Unmarshal(docs[i%len(docs)], &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkUpdateApply(b *testing.B) {
	docs := benchCorpus()[:1000]
	updates := map[string]string{
		"set":          `{"$set": {"name": "x"}}`,
		"inc":          `{"$inc": {"n": 1}}`,
		"set nested":   `{"$set": {"nested.y": "z"}, "$inc": {"score": 1}}`,
		"push":         `{"$push": {"tags": "new"}}`,
		"noop":         `{"$set": {"nested.y": "why"}}`,
		"replacement":  `{"a": 1}`,
		"pipeline set": `[{"$set": {"m": {"$multiply": ["$n", 2]}}}]`,
	}
	for name, us := range updates {
		u, err := CompileUpdate(val(b, us), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := u.Apply(docs[i%len(docs)], ApplyOptions{PositionalIndex: -1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Baseline: decoding to bson.D, changing a field and encoding again.
	b.Run("baseline unmarshal-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var d bson.D
			if err := bson.Unmarshal(docs[i%len(docs)], &d); err != nil {
				b.Fatal(err)
			}
			d[1].Value = "x"
			if _, err := bson.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGroup(b *testing.B) {
	docs := benchCorpus()
	p, err := CompilePipeline(stages(b, `[{"$group": {"_id": "$cat", "total": {"$sum": "$n"}, "avg": {"$avg": "$score"}, "count": {"$sum": 1}}}]`))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("100k docs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := p.Run(nil, docs)
			if err != nil {
				b.Fatal(err)
			}
			if len(out) != 100 {
				b.Fatalf("got %d groups", len(out))
			}
		}
	})
	b.Run("baseline unmarshal 100k to maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sums := map[string]int64{}
			for _, d := range docs {
				var m bson.M
				if err := bson.Unmarshal(d, &m); err != nil {
					b.Fatal(err)
				}
				sums[m["cat"].(string)] += int64(m["n"].(int32))
			}
		}
	})
}

func BenchmarkSort(b *testing.B) {
	docs := benchCorpus()
	s, err := CompileSort(doc(b, `{"cat": 1, "score": -1}`))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("SortDocs 100k", func(b *testing.B) {
		for b.Loop() {
			s.SortDocs(slices.Clone(docs))
		}
	})
	b.Run("SliceStable with Compare 100k", func(b *testing.B) {
		for b.Loop() {
			d := slices.Clone(docs)
			sort.SliceStable(d, func(i, j int) bool { return s.Compare(d[i], d[j]) < 0 })
		}
	})
}
