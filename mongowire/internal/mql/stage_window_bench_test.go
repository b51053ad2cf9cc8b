package mql

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkSetWindowFields runs windows over the 100k-document corpus in
// 100 partitions: a running sum (folded incrementally), a moving average
// of 11 documents, a range window and $rank.
func BenchmarkSetWindowFields(b *testing.B) {
	docs := benchCorpus()
	windows := map[string]string{
		"running sum":         `{"$sum": "$score", "window": {"documents": ["unbounded", "current"]}}`,
		"moving avg of 11":    `{"$avg": "$score", "window": {"documents": [-5, 5]}}`,
		"range of values ±10": `{"$count": {}, "window": {"range": [-10, 10]}}`,
		"rank":                `{"$rank": {}}`,
	}
	for name, w := range windows {
		p, err := CompilePipeline(stages(b, `[{"$setWindowFields": {"partitionBy": "$cat", "sortBy": {"n": 1}, "output": {"w": `+w+`}}}]`))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+" 100k docs", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := p.Run(nil, docs)
				if err != nil {
					b.Fatal(err)
				}
				if len(out) != len(docs) {
					b.Fatalf("got %d documents", len(out))
				}
			}
		})
	}
}

// BenchmarkGraphLookup follows a chain of 100 documents (each points to
// the next) in a collection of 1,000, from 10 start documents.
func BenchmarkGraphLookup(b *testing.B) {
	var coll []bson.Raw
	for i := range 1000 {
		d, err := bson.Marshal(bson.D{{Key: "_id", Value: i}, {Key: "name", Value: fmt.Sprint("n", i)}, {Key: "next", Value: fmt.Sprint("n", i+1)}})
		if err != nil {
			b.Fatal(err)
		}
		coll = append(coll, d)
	}
	env := mapEnv{"g": coll}
	p, err := CompilePipeline(stages(b, `[{"$graphLookup": {"from": "g", "startWith": "$next", "connectFromField": "next", "connectToField": "name", "as": "chain", "maxDepth": 99}}]`))
	if err != nil {
		b.Fatal(err)
	}
	in := coll[:10]
	b.Run("10 chains of 100 over 1k docs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := p.Run(env, in)
			if err != nil {
				b.Fatal(err)
			}
			if n := arrayLen(bson.Raw(out[0]).Lookup("chain").Value); n != 100 {
				b.Fatalf("chain of %d", n)
			}
		}
	})
}
