package mongo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// BenchmarkIncrementalSnapshotRate compares the rate of an incremental
// snapshot of a collection with the initial snapshot of the same
// collection, from Open to the last document polled.
func BenchmarkIncrementalSnapshotRate(b *testing.B) {
	const n = 20000
	e := newMultiEnv(b)
	docs := make([]any, n)
	for i := range docs {
		docs[i] = benchDoc(i)
	}
	if _, err := e.coll("shop.a").InsertMany(context.Background(), docs); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, initial bool, chunk int) {
		total := 0
		var copying, waiting time.Duration
		for range b.N {
			start := time.Now()
			cfg := e.config(b, "shop", "*")
			cfg.Logger = slogDiscard()
			if initial {
				cfg.Snapshot = "initial"
			}
			src := New(cfg)
			if err := src.Open(context.Background(), nil); err != nil {
				b.Fatal(err)
			}
			if !initial {
				if _, err := src.RequestSnapshot(context.Background(), cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: chunk}); err != nil {
					b.Fatal(err)
				}
			}
			first := pollSnapshotRows(b, src, 1)
			copyStart := time.Now()
			total += first + pollSnapshotRows(b, src, n-first)
			copying += time.Since(copyStart)
			waiting += copyStart.Sub(start)
			src.Close()
		}
		// The rate of the copy, from its first document to its last; an
		// incremental snapshot starts at the reader's next batch
		// boundary (at most max_await after the request, 100 ms here).
		b.ReportMetric(float64(total)/copying.Seconds(), "docs/s")
		b.ReportMetric(waiting.Seconds()*1000/float64(b.N), "ms-to-first-doc")
	}
	b.Run("initial", func(b *testing.B) { run(b, true, 0) })
	for _, chunk := range []int{1000, 10000} {
		b.Run(fmt.Sprint("incremental-chunk-", chunk), func(b *testing.B) { run(b, false, chunk) })
	}
}

func pollSnapshotRows(b *testing.B, src *Source, n int) int {
	got := 0
	buf := make([]cdc.Event, 0, 1000)
	for got < n {
		var err error
		if buf, err = src.Poll(context.Background(), buf[:0], 1000); err != nil {
			b.Fatal(err)
		}
		for _, ev := range buf {
			if ev.Op == cdc.OpSnapshot {
				got++
			}
		}
		if len(buf) == 0 {
			<-src.Ready()
		}
	}
	return got
}

// BenchmarkStreamWhileSnapshot measures how fast a source reads a
// stream of inserts written while it runs, alone and with an incremental
// snapshot of another collection under way the whole time.
func BenchmarkStreamWhileSnapshot(b *testing.B) {
	const copied, written = 200_000, 20_000
	e := newMultiEnv(b, "shop.w")
	docs := make([]any, 0, 10000)
	for i := range copied {
		docs = append(docs, benchDoc(i))
		if len(docs) == cap(docs) {
			if _, err := e.coll("shop.a").InsertMany(context.Background(), docs); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
	seq := 0 // _ids of the writes, unique over every run
	for _, withSnapshot := range []bool{false, true} {
		name := "stream"
		if withSnapshot {
			name = "stream+snapshot"
		}
		b.Run(name, func(b *testing.B) {
			total, rows := 0, int64(0)
			for range b.N {
				cfg := e.config(b, "shop", "*")
				cfg.Logger = slogDiscard()
				cfg.MaxAwait = 20 * time.Millisecond
				src := New(cfg)
				if err := src.Open(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
				if withSnapshot {
					if _, err := src.RequestSnapshot(context.Background(), cdc.SnapshotRequest{Collections: []string{"shop.a"}, Chunk: 1000}); err != nil {
						b.Fatal(err)
					}
				}
				// The writer: inserts in batches of 100, as fast as the
				// server takes them.
				wrote := make(chan error, 1)
				base := seq
				seq += written
				go func() { // ends before this iteration does
					batch := make([]any, 0, 100)
					for k := range written {
						batch = append(batch, bson.D{{Key: "_id", Value: base + k}, {Key: "pad", Value: "0123456789012345678901234567890123456789"}})
						if len(batch) == cap(batch) {
							if _, err := e.coll("shop.w").InsertMany(context.Background(), batch); err != nil {
								wrote <- err
								return
							}
							batch = batch[:0]
						}
					}
					wrote <- nil
				}()
				got := 0
				buf := make([]cdc.Event, 0, 1000)
				for got < written {
					var err error
					if buf, err = src.Poll(context.Background(), buf[:0], 1000); err != nil {
						b.Fatal(err)
					}
					for _, ev := range buf {
						if ev.Op == cdc.OpInsert {
							got++
						}
					}
					if len(buf) == 0 {
						select {
						case <-src.Ready():
						case err := <-wrote:
							if err != nil {
								b.Fatal(err)
							}
							wrote <- nil
						}
					}
				}
				if err := <-wrote; err != nil {
					b.Fatal(err)
				}
				rows += src.isnap.rows.Load()
				if withSnapshot && isnapInfo(src, "1").State != cdc.SnapshotRunning {
					b.Fatalf("the snapshot ended before the stream: make the collection bigger")
				}
				src.Close()
				total += got
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "snapshot-rows/s")
		})
	}
}
