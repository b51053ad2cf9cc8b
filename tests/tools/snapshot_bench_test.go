package tools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/source/mongo"
)

// BenchmarkSnapshotVsMongodump copies one collection of TIDE_BENCH_DOCS
// (default 300000) 1 KiB documents from the embedded server, once with
// Tide's initial snapshot into a JSON-lines file (tide run: source, the
// runtime, the file sink and a durable checkpoint store) and once with
// mongodump --archive into a file. The two alternate, b.N rounds, taking
// turns to go first; the medians and the median ratio are reported.
// TIDE_BENCH_PARALLELISM sets snapshot_parallelism (default 2).
func BenchmarkSnapshotVsMongodump(b *testing.B) {
	dir := os.Getenv("TIDE_MONGO_TOOLS") // mongodump alone is enough here
	if _, err := os.Stat(filepath.Join(dir, "mongodump")); dir == "" || err != nil {
		var err error
		if dir, err = findTools(); err != nil {
			testenv.Need(b, "tools", fmt.Errorf("MongoDB database tools: %v (set TIDE_MONGO_TOOLS or TIDE_MONGO_TOOLS_SRC)", err))
		}
	}
	n := 300_000
	if v := os.Getenv("TIDE_BENCH_DOCS"); v != "" {
		fmt.Sscan(v, &n)
	}
	srv := testenv.MongoWire(b)
	c := testenv.MongoClient(b, srv.URI())
	pad := strings.Repeat("x", 1024-40) // ~1 KiB of BSON with _id and n
	for i := 0; i < n; i += 1000 {
		batch := make([]any, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			batch = append(batch, bson.D{{Key: "_id", Value: int64(j)}, {Key: "n", Value: int32(j)}, {Key: "pad", Value: pad}})
		}
		if _, err := c.Database("bench").Collection("c").InsertMany(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	tide, dump := testenv.Alternate(b,
		func() float64 { return float64(n) / snapshotTide(b, srv.URI(), n).Seconds() },
		func() float64 {
			out := filepath.Join(b.TempDir(), "a.archive")
			defer os.Remove(out)
			start := time.Now()
			if o, err := exec.Command(filepath.Join(dir, "mongodump"), "--uri", srv.URI(), "--archive="+out, "--db", "bench", "--collection", "c").CombinedOutput(); err != nil {
				b.Fatalf("mongodump: %v\n%s", err, o)
			}
			return float64(n) / time.Since(start).Seconds()
		})
	ratios := testenv.Ratios(tide, dump)
	b.ReportMetric(testenv.Median(tide), "tide_docs/s")
	b.ReportMetric(testenv.Median(dump), "mongodump_docs/s")
	b.ReportMetric(testenv.Median(ratios), "ratio")
	b.ReportMetric(0, "ns/op")
}

// snapshotTide runs a pipeline whose source copies bench.c into a file
// until n records are committed, and returns how long that took from its
// start.
func snapshotTide(b *testing.B, uri string, n int) time.Duration {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	cfg := mongo.DefaultConfig()
	cfg.URI, cfg.Database, cfg.Collection = uri, "bench", "c"
	if v, err := strconv.Atoi(os.Getenv("TIDE_BENCH_PARALLELISM")); err == nil {
		cfg.SnapshotParallelism = v
	}
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	sink := testenv.NewCountingSink(file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), n)
	p := pipeline.New(pipeline.Config{Name: "bench"}, mongo.New(cfg), encode.Envelope, sink, store)
	return testenv.RunUntil(b, p.Run, sink.Reached())
}
