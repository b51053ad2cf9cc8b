package store

import (
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestExpireTTLPartialAndBatches expires more than one batch, honours a
// partialFilterExpression, and leaves other collections alone.
func TestExpireTTLPartialAndBatches(t *testing.T) {
	s, err := Open(Config{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.Unix(1_700_000_000, 0)
	var docs []bson.Raw
	for i := range 2*ttlBatch + 10 {
		docs = append(docs, raw(t, bson.D{{Key: "_id", Value: i}, {Key: "at", Value: bson.NewDateTimeFromTime(base)}, {Key: "keep", Value: i%2 == 0}}))
	}
	if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
		t.Fatal(errs[0].Err)
	}
	partial := bson.D{{Key: "keep", Value: false}}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "at", Value: 1}}, Options: bson.D{{Key: "expireAfterSeconds", Value: int32(10)}, {Key: "partialFilterExpression", Value: partial}}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ExpireTTL(base.Add(5 * time.Second)); err != nil || n != 0 {
		t.Fatalf("before expiry: deleted %d, %v; want 0", n, err)
	}
	n, err := s.ExpireTTL(base.Add(11 * time.Second))
	if err != nil || n != ttlBatch+5 {
		t.Fatalf("deleted %d, %v; want %d (the documents with keep: false)", n, err, ttlBatch+5)
	}
	left, err := s.Count(nsA, nil, 0, 0)
	if err != nil || left != ttlBatch+5 {
		t.Fatalf("left %d, %v", left, err)
	}
}

// BenchmarkTTLPass measures one pass of the TTL monitor over a collection
// of TTL_BENCH_DOCS documents (default 1,000,000) of which 1% expire per
// pass; the collection is refilled when it runs out.
func BenchmarkTTLPass(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("TTL_BENCH_DOCS")); err == nil && v > 0 {
		n = v
	}
	perPass := n / 100
	base := time.Unix(1_700_000_000, 0)
	s, err := Open(Config{TTLInterval: -1, NoopInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "at", Value: 1}}, Options: bson.D{{Key: "expireAfterSeconds", Value: int32(0)}}}}); err != nil {
		b.Fatal(err)
	}
	fill := func() {
		docs := make([]bson.Raw, 0, 1000)
		for i := range n {
			docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "at", Value: bson.NewDateTimeFromTime(base.Add(time.Duration(i) * time.Millisecond))}, {Key: "pad", Value: "some text of a typical document"}}))
			if len(docs) == cap(docs) || i == n-1 {
				if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
					b.Fatal(errs[0].Err)
				}
				docs = docs[:0]
			}
		}
	}
	fill()
	pass := 0
	deleted := 0
	b.ResetTimer()
	for range b.N {
		if pass == 100 {
			b.StopTimer()
			fill()
			pass = 0
			b.StartTimer()
		}
		pass++
		now := base.Add(time.Duration(pass*perPass) * time.Millisecond)
		d, err := s.ExpireTTL(now)
		if err != nil {
			b.Fatal(err)
		}
		deleted += d
	}
	b.ReportMetric(float64(deleted)/float64(b.N), "deleted/pass")
}

// BenchmarkTTLPassIdle is a pass that finds nothing to expire.
func BenchmarkTTLPassIdle(b *testing.B) {
	s, err := Open(Config{TTLInterval: -1, NoopInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base := time.Unix(1_700_000_000, 0)
	docs := make([]bson.Raw, 0, 100_000)
	for i := range cap(docs) {
		docs = append(docs, raw(b, bson.D{{Key: "_id", Value: i}, {Key: "at", Value: bson.NewDateTimeFromTime(base.Add(time.Duration(i) * time.Second))}}))
	}
	if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
		b.Fatal(errs[0].Err)
	}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "at", Value: 1}}, Options: bson.D{{Key: "expireAfterSeconds", Value: int32(0)}}}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.ExpireTTL(base); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCollModTTLSurvivesRestart: a changed expireAfterSeconds is journaled.
func TestCollModTTLSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "at", Value: 1}}, Options: bson.D{{Key: "expireAfterSeconds", Value: int32(100)}}}}); err != nil {
		t.Fatal(err)
	}
	if old, had, err := s.CollModTTL(nsA, IndexRef{Name: "at_1"}, 5); err != nil || !had || old != 100 {
		t.Fatalf("CollModTTL = %v %v %v", old, had, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Config{Dir: dir, TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	specs, err := s.ListIndexes(nsA)
	if err != nil || len(specs) != 2 {
		t.Fatalf("ListIndexes: %v %v", specs, err)
	}
	if secs, ok := ttlSeconds(specs[1]); !ok || secs != 5 {
		t.Fatalf("expireAfterSeconds after restart = %v %v, want 5", secs, ok)
	}
	opts := s.ListCollections(nsA.DB)[0].Options
	for _, o := range opts {
		if o.Key == "index" {
			t.Fatalf("the index change leaked into the collection options: %v", opts)
		}
	}
}
