package store

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fillNames inserts n documents {_id: i, name: "user<i>", pad} into ns.
func fillNames(b *testing.B, s *Store, ns Namespace, n int) {
	b.Helper()
	docs := make([]bson.Raw, 0, 1000)
	for i := range n {
		docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "name", Value: fmt.Sprintf("user%06d", i)}, {Key: "pad", Value: "some text of a typical document"}}))
		if len(docs) == cap(docs) || i == n-1 {
			if _, errs := s.Insert(ns, docs, true); len(errs) > 0 {
				b.Fatal(errs[0].Err)
			}
			docs = docs[:0]
		}
	}
}

// BenchmarkCollatedFind: an equality find through an index on 100k
// documents, with a case-insensitive collation (the index's) against the
// same find with none (the baseline, an index without collation), in one
// run. The goal is collated ≥ 0.5× the baseline's rate.
//
//	go test ./mongowire/internal/store -run '^$' -bench 'CollatedFind' -benchtime 2s -count 3
func BenchmarkCollatedFind(b *testing.B) {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	plain, ci := Namespace{DB: "db", Coll: "plain"}, Namespace{DB: "db", Coll: "ci"}
	fillNames(b, s, plain, 100_000)
	fillNames(b, s, ci, 100_000)
	en2 := bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: int32(2)}}
	if _, _, _, err := s.CreateIndexes(plain, []IndexSpec{{Key: bson.D{{Key: "name", Value: 1}}}}); err != nil {
		b.Fatal(err)
	}
	if _, _, _, err := s.CreateIndexes(ci, []IndexSpec{{Key: bson.D{{Key: "name", Value: 1}}, Options: bson.D{{Key: "collation", Value: en2}}}}); err != nil {
		b.Fatal(err)
	}
	collation := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw(b, en2)}
	run := func(b *testing.B, ns Namespace, name string, coll bson.RawValue) {
		i := 0
		for b.Loop() {
			i = (i + 7919) % 100_000
			spec := FindSpec{Filter: raw(b, bson.D{{Key: "name", Value: fmt.Sprintf(name, i)}}), Collation: coll}
			docs, plan, err := s.find(nil, ns, spec)
			if err != nil || len(docs) != 1 || plan.Index != "name_1" {
				b.Fatalf("find: %d documents, plan %+v, %v", len(docs), plan, err)
			}
		}
	}
	b.Run("simple", func(b *testing.B) { run(b, plain, "user%06d", bson.RawValue{}) })
	b.Run("collated", func(b *testing.B) { run(b, ci, "USER%06d", collation) })
}

// BenchmarkTextSearch: $text for one word over 100k short documents
// (three to five words each, 1% of them holding the word), with the
// score projected and sorted: queries per second.
//
//	go test ./mongowire/internal/store -run '^$' -bench 'TextSearch' -benchtime 20x -count 3
func BenchmarkTextSearch(b *testing.B) {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ns := Namespace{DB: "db", Coll: "posts"}
	vocabulary := []string{"morning", "walks", "river", "bakery", "bread", "cycling", "market", "garden", "reading", "music", "rain", "trains", "lunch", "friends", "city", "evening", "cooking", "soup", "tea", "books"}
	docs := make([]bson.Raw, 0, 1000)
	for i := range 100_000 {
		n := 3 + i%3
		text := ""
		for j := range n {
			if j > 0 {
				text += " "
			}
			text += vocabulary[(i*7+j*13)%len(vocabulary)]
		}
		if i%100 == 0 {
			text += " coffee"
		}
		docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "text", Value: text}}))
		if len(docs) == cap(docs) {
			if _, errs := s.Insert(ns, docs, true); len(errs) > 0 {
				b.Fatal(errs[0].Err)
			}
			docs = docs[:0]
		}
	}
	if _, _, _, err := s.CreateIndexes(ns, []IndexSpec{{Name: "text_text", Key: bson.D{{Key: "text", Value: "text"}}}}); err != nil {
		b.Fatal(err)
	}
	score := bson.D{{Key: "score", Value: bson.D{{Key: "$meta", Value: "textScore"}}}}
	spec := FindSpec{
		Filter:     raw(b, bson.D{{Key: "$text", Value: bson.D{{Key: "$search", Value: "coffee"}}}}),
		Projection: raw(b, score),
		Sort:       raw(b, score),
	}
	for b.Loop() {
		docs, err := s.Find(ns, spec)
		if err != nil || len(docs) != 1000 {
			b.Fatalf("find: %d documents, %v", len(docs), err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}
