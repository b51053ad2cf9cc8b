package mongowire_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

const (
	benchClients = 4
	benchDocs    = 100_000
)

// BenchmarkServer measures the embedded server through the Go driver on
// loopback with 4 concurrent clients. Each sub-benchmark reports ops/s
// and p99 latency; find-indexed against find-unindexed is the index
// speed-up (at least 20x on 100k documents).
//
//	go test ./mongowire -run '^$' -bench 'BenchmarkServer$' -benchtime 1s
func BenchmarkServer(b *testing.B) {
	s := testenv.MongoWire(b)
	ctx := context.Background()
	c := testenv.MongoClient(b, s.URI())
	coll := c.Database("bench").Collection("docs")
	load(b, coll)

	b.Run("insertOne", func(b *testing.B) {
		ins := c.Database("bench").Collection("inserts")
		var seq atomic.Int64
		parallel(b, func() error {
			_, err := ins.InsertOne(ctx, bson.D{{Key: "n", Value: seq.Add(1)}, {Key: "s", Value: "some text payload"}})
			return err
		})
	})
	b.Run("find_by_id", func(b *testing.B) {
		var seq atomic.Int64
		parallel(b, func() error {
			return findOne(ctx, coll, bson.D{{Key: "_id", Value: seq.Add(7919) % benchDocs}})
		})
	})
	b.Run("find_indexed", func(b *testing.B) {
		var seq atomic.Int64
		parallel(b, func() error {
			return findOne(ctx, coll, bson.D{{Key: "k", Value: seq.Add(7919) % benchDocs}})
		})
	})
	b.Run("find_unindexed", func(b *testing.B) {
		var seq atomic.Int64
		parallel(b, func() error {
			return findOne(ctx, coll, bson.D{{Key: "u", Value: seq.Add(7919) % benchDocs}})
		})
	})
	b.Run("updateOne_inc", func(b *testing.B) {
		var seq atomic.Int64
		parallel(b, func() error {
			res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: seq.Add(7919) % benchDocs}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "c", Value: 1}}}})
			if err == nil && res.ModifiedCount != 1 {
				err = fmt.Errorf("modified %d", res.ModifiedCount)
			}
			return err
		})
	})
	b.Run("aggregate_group", func(b *testing.B) {
		pipe := mongo.Pipeline{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}
		parallel(b, func() error {
			cur, err := coll.Aggregate(ctx, pipe)
			if err != nil {
				return err
			}
			var out []bson.Raw
			if err := cur.All(ctx, &out); err != nil {
				return err
			}
			if len(out) != 10 {
				return fmt.Errorf("%d groups", len(out))
			}
			return nil
		})
	})
}

// load inserts benchDocs documents {_id, k (indexed), u (not), g, pad}.
func load(b *testing.B, coll *mongo.Collection) {
	b.Helper()
	ctx := context.Background()
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		b.Fatal(err)
	}
	batch := make([]any, 0, 5000)
	for i := range benchDocs {
		batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i}, {Key: "u", Value: i}, {Key: "g", Value: i % 10}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
		if len(batch) == cap(batch) {
			if _, err := coll.InsertMany(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func findOne(ctx context.Context, coll *mongo.Collection, filter bson.D) error {
	raw, err := coll.FindOne(ctx, filter).Raw()
	if err != nil {
		return err
	}
	if raw.Lookup("_id").Type == 0 {
		return fmt.Errorf("no _id in %v", raw)
	}
	return nil
}

// parallel runs b.N calls of op on benchClients goroutines and reports
// ops/s and the p99 latency.
func parallel(b *testing.B, op func() error) {
	b.Helper()
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, b.N)
		errc = make(chan error, benchClients)
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			local := make([]time.Duration, 0, b.N/benchClients+1)
			defer func() {
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(); err != nil {
					errc <- err
					return
				}
				local = append(local, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkServerMemory inserts TIDE_BENCH_MEM_MB (default 64) MiB of
// ~1 KiB documents into a fresh in-memory server through the driver and
// reports the peak and retained heap against the raw BSON size (the goal is
// a peak under 2.5x). Each iteration uses its own server; run it once:
//
//	TIDE_BENCH_MEM_MB=1024 go test ./mongowire -run '^$' -bench BenchmarkServerMemory -benchtime 1x
func BenchmarkServerMemory(b *testing.B) {
	for range b.N {
		benchMemory(b)
	}
}

func benchMemory(b *testing.B) {
	ctx := context.Background()
	mb := 64
	if v, err := strconv.Atoi(os.Getenv("TIDE_BENCH_MEM_MB")); err == nil && v > 0 {
		mb = v
	}
	target := int64(mb) << 20
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	s := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Disconnect(ctx)
	coll := c.Database("benchmem").Collection("docs")
	peakAbove := sampleHeap(20 * time.Millisecond)
	pad := make([]byte, 900)
	var raw int64
	batch := make([]any, 0, 1000)
	for i := 0; raw < target; i++ {
		d := bson.D{{Key: "_id", Value: i}, {Key: "n", Value: int64(i)}, {Key: "s", Value: "memory benchmark"}, {Key: "pad", Value: bson.Binary{Data: pad}}}
		bs, _ := bson.Marshal(d)
		raw += int64(len(bs))
		batch = append(batch, bson.Raw(bs))
		if len(batch) == cap(batch) {
			if _, err := coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(true)); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if _, err := coll.InsertMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak := peakAbove()
	b.ReportMetric(float64(raw)/(1<<20), "raw-MiB")
	b.ReportMetric(float64(peak)/float64(raw), "peak-heap/raw")
	b.ReportMetric(float64(after.HeapInuse-min(after.HeapInuse, base.HeapInuse))/float64(raw), "retained-heap/raw")
}
