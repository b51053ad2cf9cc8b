package mongowire

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Change-stream benchmarks through the Go driver on loopback (issue #4):
//
//	go test ./mongowire -run '^$' -bench ChangeStream -benchtime 2000x
//
// They report custom metrics: latency percentiles, the ratio of events
// delivered to inserts accepted, and insert throughput with and without a
// watcher. The oplog's memory bound is measured in package changestream.

func benchServer(b *testing.B) *mongo.Client {
	b.Helper()
	s := New(Config{Addr: "127.0.0.1:0"})
	if s.openChangeStream == nil {
		s.openChangeStream = s.openChangeStreamSource
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

func kib() bson.D {
	return bson.D{{Key: "pad", Value: make([]byte, 1000)}}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchmarkChangeStreamLatency: one writer, one watcher; each insert waits
// for its event before the next, and the time from the start of the insert
// to the event's arrival at the watcher is recorded.
func BenchmarkChangeStreamLatency(b *testing.B) {
	c := benchServer(b)
	ctx := b.Context()
	coll := c.Database("bench").Collection("latency")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	// A ChangeStream is not safe for concurrent use: the watcher goroutine
	// owns it, and cancelling its context stops it.
	watchCtx, stop := context.WithCancel(ctx)
	arrived := make(chan time.Time)
	go func() {
		defer close(arrived)
		defer cs.Close(context.Background())
		for cs.Next(watchCtx) {
			select {
			case arrived <- time.Now():
			case <-watchCtx.Done():
				return
			}
		}
	}()
	defer func() {
		stop()
		for range arrived {
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := coll.InsertOne(ctx, kib()); err != nil {
			b.Fatal(err)
		}
		at, ok := <-arrived
		if !ok {
			b.Fatalf("stream ended: %v", cs.Err())
		}
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}

// BenchmarkChangeStreamThroughput: one writer inserts 1 KiB documents as
// fast as it can while one watcher reads; reports inserts/s accepted,
// events/s delivered (until the last event), their ratio and the largest
// lag seen in events.
func BenchmarkChangeStreamThroughput(b *testing.B) {
	c := benchServer(b)
	ctx := b.Context()
	coll := c.Database("bench").Collection("throughput")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	var received atomic.Int64
	done := make(chan time.Time, 1)
	n := int64(b.N)
	go func() {
		defer cs.Close(context.Background())
		for cs.Next(ctx) {
			if received.Add(1) == n {
				done <- time.Now()
				return
			}
		}
		done <- time.Time{}
	}()
	var maxLag int64
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		if _, err := coll.InsertOne(ctx, kib()); err != nil {
			b.Fatal(err)
		}
		maxLag = max(maxLag, i+1-received.Load())
	}
	wrote := time.Since(start)
	last := <-done
	b.StopTimer()
	if last.IsZero() {
		b.Fatalf("stream ended after %d of %d events: %v", received.Load(), n, cs.Err())
	}
	insertRate := float64(n) / wrote.Seconds()
	eventRate := float64(n) / last.Sub(start).Seconds()
	b.ReportMetric(insertRate, "inserts/s")
	b.ReportMetric(eventRate, "events/s")
	b.ReportMetric(eventRate/insertRate, "events/inserts")
	b.ReportMetric(float64(maxLag), "max-lag-events")
}

// BenchmarkChangeStreamOplogCost: insert throughput of one writer with an
// active change stream consuming, against the same with no stream, in the
// same run. The two alternate in ten rounds of b.N/10 inserts each, so
// that the load of a shared machine weighs on both alike.
func BenchmarkChangeStreamOplogCost(b *testing.B) {
	c := benchServer(b)
	ctx := b.Context()
	coll := c.Database("bench").Collection("cost")
	const rounds = 10
	chunk := max(1, b.N/rounds)
	insertChunk := func() time.Duration {
		start := time.Now()
		for range chunk {
			if _, err := coll.InsertOne(ctx, kib()); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var watched, unwatched time.Duration
	b.ResetTimer()
	for range rounds {
		unwatched += insertChunk()

		cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		drained := make(chan int)
		go func() {
			defer cs.Close(context.Background())
			n := 0
			for n < chunk && cs.Next(ctx) {
				n++
			}
			drained <- n
		}()
		watched += insertChunk()
		if n := <-drained; n != chunk {
			b.Fatalf("watcher got %d of %d events: %v", n, chunk, cs.Err())
		}
	}
	b.StopTimer()
	total := float64(rounds * chunk)
	b.ReportMetric(total/unwatched.Seconds(), "inserts/s-unwatched")
	b.ReportMetric(total/watched.Seconds(), "inserts/s-watched")
	b.ReportMetric(unwatched.Seconds()/watched.Seconds(), "watched/unwatched")
}
