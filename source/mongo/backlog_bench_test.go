package mongo

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// kibDoc is benchDoc padded to 1 KiB of BSON.
func kibDoc(tb testing.TB, i int) bson.D {
	d := benchDoc(i)
	raw, err := bson.Marshal(d)
	if err != nil {
		tb.Fatal(err)
	}
	for k := range d {
		if d[k].Key == "note" {
			d[k].Value = strings.Repeat("n", 120+1024-len(raw))
		}
	}
	return d
}

// BenchmarkBacklogToFile reads a backlog of inserts of 1 KiB documents
// (TIDE_BENCH_BACKLOG, default 100000) from the embedded server, once
// through the source, the runtime and the file sink with a durable
// checkpoint store and the default batch settings (what tide run does),
// and once with a bare driver Watch loop that only receives the events.
// The two alternate, b.N rounds, taking turns to go first; the medians
// are reported. Tide's clock starts when the pipeline starts: the
// checkpoint that places it at the backlog's start is saved before, as a
// bare loop's resume token is given to it.
// TIDE_BENCH_MAX_RECORDS sets batch.max_records (and max_bytes 64 MiB)
// instead of the defaults.
func BenchmarkBacklogToFile(b *testing.B) {
	e, start, n := seedBacklog(b, 100_000)

	tide, bare := testenv.Alternate(b,
		func() float64 { return float64(n) / backlogTide(b, e, start, n).Seconds() },
		func() float64 {
			t0 := time.Now()
			backlogBare(b, e, start, n)
			return float64(n) / time.Since(t0).Seconds()
		})
	b.ReportMetric(testenv.Median(tide), "tide_events/s")
	b.ReportMetric(testenv.Median(bare), "watch_events/s")
	b.ReportMetric(testenv.Median(testenv.Ratios(tide, bare)), "ratio")
	b.ReportMetric(0, "ns/op")
}

// backlogTide runs the pipeline into a file until n events reached it and
// returns how long that took from the pipeline's start.
func backlogTide(b *testing.B, e *env, start bson.Raw, n int) time.Duration {
	pc := pipeline.Config{}
	if v, err := strconv.Atoi(os.Getenv("TIDE_BENCH_MAX_RECORDS")); err == nil && v > 0 {
		pc.MaxRecords, pc.MaxBytes = v, 64<<20 // to see what the batch size does
	}
	return backlogInto(b, e, start, n, pc, fileSink)
}

// fileSink is a file sink writing into dir.
func fileSink(dir string) cdc.Sink {
	return file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")})
}

// backlogInto runs the pipeline pc (named bench) from the backlog's start
// into the sink newSink makes (in a directory of its own) until n events
// are committed, with a durable checkpoint store, and returns how long
// that took from the pipeline's start: the checkpoint that places it at
// the backlog's start is saved before, as a bare loop's resume token is
// given to it.
func backlogInto(b *testing.B, e *env, start bson.Raw, n int, pc pipeline.Config, newSink func(dir string) cdc.Sink) time.Duration {
	dir := b.TempDir()
	defer os.RemoveAll(dir) // no round shares the disk with an earlier round's file
	cfg := e.config(b)
	cfg.MaxAwait = 0 // the default, as tide run
	probe := New(cfg)
	if err := probe.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	id := probe.Identity()
	probe.Close()
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), slogDiscard())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	if err := store.Save(context.Background(), "bench", cdc.Checkpoint{Source: resumePos(start), Meta: id}); err != nil {
		b.Fatal(err)
	}
	sink := testenv.NewCountingSink(newSink(dir), n)
	pc.Name = "bench"
	p := pipeline.New(pc, New(cfg), encode.Envelope, sink, store)
	return testenv.RunUntil(b, p.Run, sink.Reached())
}

func backlogBare(b *testing.B, e *env, start bson.Raw, n int) {
	ctx := context.Background()
	cs, err := e.coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(start))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(ctx)
	got := 0
	for got < n && cs.Next(ctx) {
		got++
	}
	if got < n {
		b.Fatalf("watch: %d of %d events: %v", got, n, cs.Err())
	}
}

// seedBacklog starts the embedded server and inserts a backlog of 1 KiB
// documents (TIDE_BENCH_BACKLOG, else def) after a resume token it
// returns, so that each round reads the same backlog from start.
func seedBacklog(b *testing.B, def int) (e *env, start bson.Raw, n int) {
	n = def
	if v, err := strconv.Atoi(os.Getenv("TIDE_BENCH_BACKLOG")); err == nil && v > 0 {
		n = v
	}
	e = newEnv(b)
	cs, err := e.coll.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetBatchSize(0))
	if err != nil {
		b.Fatal(err)
	}
	start = slices.Clone(cs.ResumeToken())
	cs.Close(context.Background())
	for i := 0; i < n; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			docs = append(docs, kibDoc(b, j))
		}
		if _, err := e.coll.InsertMany(context.Background(), docs); err != nil {
			b.Fatal(err)
		}
	}
	return e, start, n
}
