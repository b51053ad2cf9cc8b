package mongo

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// benchCatchUp writes a backlog of changes over ten collections, then
// measures how fast sources made by open read all of it.
func benchCatchUp(b *testing.B, perColl int, read func(e *multiEnv, cps map[string]cdc.Checkpoint) int) {
	e := newMultiEnv(b)
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("shop.c%d", i)
		e.create(b, names[i])
	}
	// A checkpoint before the backlog, for each shape of source.
	cps := map[string]cdc.Checkpoint{}
	take := func(key string, cfg Config) {
		src := New(cfg)
		if err := src.Open(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		evs, err := pollUntil(b, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
		if err != nil {
			b.Fatal(err)
		}
		cps[key] = checkpointOf(evs[len(evs)-1].Pos, src.Identity())
		src.Close()
	}
	take("multi", e.config(b, "shop", "*"))
	for _, ns := range names {
		cfg := e.config(b, "shop")
		cfg.Collections, cfg.Collection = nil, ns[len("shop."):]
		take(ns, cfg)
	}
	docs := make([]any, perColl)
	for _, ns := range names {
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: "0123456789012345678901234567890123456789"}}
		}
		if _, err := e.coll(ns).InsertMany(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu0 := processCPU()
	total := 0
	for range b.N {
		total += read(e, cps)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
	// The server runs in this process: its CPU and the sources' together.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(total), "cpu-µs/event")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCatchUpTenCollections compares one database-level source over
// ten collections with ten single-collection sources read at once.
func BenchmarkCatchUpTenCollections(b *testing.B) {
	const perColl = 3000
	drain := func(src *Source, n int) {
		got := 0
		buf := make([]cdc.Event, 0, 1000)
		for got < n {
			var err error
			buf, err = src.Poll(context.Background(), buf[:0], 1000)
			if err != nil {
				panic(err)
			}
			for _, ev := range buf {
				if ev.Op != cdc.OpMarker {
					got++
				}
			}
			if len(buf) == 0 {
				<-src.Ready()
			}
		}
	}
	b.Run("one-database-stream", func(b *testing.B) {
		benchCatchUp(b, perColl, func(e *multiEnv, cps map[string]cdc.Checkpoint) int {
			cp := cps["multi"]
			src := New(e.config(b, "shop", "*"))
			if err := src.Open(context.Background(), &cp); err != nil {
				b.Fatal(err)
			}
			drain(src, 10*perColl)
			src.Close()
			return 10 * perColl
		})
	})
	b.Run("ten-collection-streams", func(b *testing.B) {
		benchCatchUp(b, perColl, func(e *multiEnv, cps map[string]cdc.Checkpoint) int {
			var wg sync.WaitGroup
			for ns, cp := range cps {
				if ns == "multi" {
					continue
				}
				cfg := e.config(b, "shop")
				cfg.Collections, cfg.Collection = nil, ns[len("shop."):]
				src := New(cfg)
				if err := src.Open(context.Background(), &cp); err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					drain(src, perColl)
					src.Close()
				})
			}
			wg.Wait()
			return 10 * perColl
		})
	})
}

// BenchmarkSnapshotParallelism copies three collections one or two at a
// time.
func BenchmarkSnapshotParallelism(b *testing.B) {
	const perColl = 20000
	e := newMultiEnv(b)
	docs := make([]any, perColl)
	for _, ns := range []string{"shop.a", "shop.b", "shop.c"} {
		for i := range docs {
			docs[i] = benchDoc(i)
		}
		if _, err := e.coll(ns).InsertMany(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
	}
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprint("parallelism-", par), func(b *testing.B) {
			total := 0
			for range b.N {
				cfg := e.config(b, "shop", "*")
				cfg.Snapshot, cfg.SnapshotParallelism = "initial", par
				src := New(cfg)
				if err := src.Open(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
				got := 0
				buf := make([]cdc.Event, 0, 1000)
				for got < 3*perColl {
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
				src.Close()
				total += got
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
