package main

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/source/generate"
)

const benchPayload = 100

// baselineLine appends the line tide writes for generated event seq, built
// by hand: the baseline does the least work that yields the same bytes.
func baselineLine(dst []byte, seq int64, secs, wallMS int64, payload string) []byte {
	dst = append(dst, `{"_namespace":"gen.events","_op":"insert","_document_key":{"_id":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `},"_cluster_time_s":`...)
	dst = strconv.AppendInt(dst, secs, 10)
	dst = append(dst, `,"_cluster_time_i":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"_wall_time_ms":`...)
	dst = strconv.AppendInt(dst, wallMS, 10)
	dst = append(dst, `,"_full_document":{"_id":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"payload":"`...)
	dst = append(dst, payload...)
	dst = append(dst, `"},"_update_desc":null,"_resume_token":null}`...)
	return append(dst, '\n')
}

// runBaseline writes n lines through a bufio.Writer with one fsync per 1000
// lines: the plain loop tide's end-to-end figure is measured against.
func runBaseline(b *testing.B, path string, n int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	payload := strings.Repeat("x", benchPayload)
	var line []byte
	for seq := int64(1); seq <= int64(n); seq++ {
		now := time.Now()
		line = baselineLine(line[:0], seq, now.Unix(), now.UnixMilli(), payload)
		if _, err := w.Write(line); err != nil {
			b.Fatal(err)
		}
		if seq%1000 == 0 || seq == int64(n) {
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// runTidePipeline streams n generated events into a file through the
// runtime, with the given checkpoint store.
func runTidePipeline(b *testing.B, dir string, n int, store pipeline.Checkpointer) {
	log := slog.New(slog.DiscardHandler)
	src := generate.New(generate.Config{Count: int64(n), PayloadBytes: benchPayload, Logger: log})
	sink := file.New(file.Config{Path: filepath.Join(dir, "events.jsonl"), Logger: log})
	p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: 1000, Logger: log}, src, encode.Envelope, sink, store)
	if err := p.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	if got := p.Stats().EventsOut; got != int64(n) {
		b.Fatalf("committed %d events, want %d", got, n)
	}
}

// lineBytes is the size of one benchmark line, for MB/s.
func lineBytes() int64 {
	now := time.Now()
	return int64(len(baselineLine(nil, 500000, now.Unix(), now.UnixMilli(), strings.Repeat("x", benchPayload))))
}

// BenchmarkEndToEnd compares generate → file through tide with the plain
// bufio loop, in the same run. Each op is one event.
//
//	go test ./cmd/tide -run '^$' -bench EndToEnd -benchtime 1000000x
func BenchmarkEndToEnd(b *testing.B) {
	b.Run("baseline-bufio", func(b *testing.B) {
		b.SetBytes(lineBytes())
		runBaseline(b, filepath.Join(b.TempDir(), "baseline.jsonl"), b.N)
	})
	b.Run("tide-durable-checkpoint", func(b *testing.B) {
		b.SetBytes(lineBytes())
		dir := b.TempDir()
		store, err := checkpoint.Open(filepath.Join(dir, ".tide"), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		runTidePipeline(b, dir, b.N, store)
	})
	b.Run("tide-memory-checkpoint", func(b *testing.B) {
		b.SetBytes(lineBytes())
		runTidePipeline(b, b.TempDir(), b.N, &checkpoint.Mem{})
	})
}

// BenchmarkDurableCheckpoint measures what the durable checkpoint costs:
// generate → file with the local checkpoint store against the same
// pipeline with the in-memory store, TIDE_BENCH_EVENTS events per run
// (default 1,000,000), TIDE_BENCH_ROUNDS rounds (default 3) alternating
// which goes first; the metrics are medians, the ratio the median of the
// rounds' durable/memory throughput ratios.
//
//	go test ./cmd/tide -run '^$' -bench DurableCheckpoint -benchtime 1x -v
func BenchmarkDurableCheckpoint(b *testing.B) {
	n := envCount(b, "TIDE_BENCH_EVENTS", 1_000_000)
	k := envCount(b, "TIDE_BENCH_ROUNDS", 3)
	log := slog.New(slog.DiscardHandler)
	// Each run's output is removed before the next starts, so that no
	// run shares the disk with the write-back of an earlier one's file.
	runIn := func(run func(dir string)) float64 {
		dir := b.TempDir()
		defer os.RemoveAll(dir)
		start := time.Now()
		run(dir)
		return float64(n) / time.Since(start).Seconds()
	}
	durable := func() float64 {
		return runIn(func(dir string) {
			store, err := checkpoint.Open(filepath.Join(dir, ".tide"), log)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			runTidePipeline(b, dir, n, store)
		})
	}
	memory := func() float64 {
		return runIn(func(dir string) { runTidePipeline(b, dir, n, &checkpoint.Mem{}) })
	}
	for range b.N {
		var ds, ms, ratios []float64
		for i := range k {
			var d, m float64
			if i%2 == 0 {
				d, m = durable(), memory()
			} else {
				m, d = memory(), durable()
			}
			ds, ms, ratios = append(ds, d), append(ms, m), append(ratios, d/m)
			b.Logf("round %d, %d events: durable %.0f events/s, memory %.0f events/s: %.3fx", i+1, n, d, m, d/m)
		}
		b.ReportMetric(testenv.Median(ds), "durable-events/s")
		b.ReportMetric(testenv.Median(ms), "memory-events/s")
		b.ReportMetric(testenv.Median(ratios), "ratio")
	}
}

func envCount(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q is not a positive count", name, v)
	}
	return n
}

// TestBaselineWritesTideLines keeps the benchmark honest: the baseline must
// produce the very bytes tide produces, save the clock fields.
func TestBaselineWritesTideLines(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	src := generate.New(generate.Config{Count: 3, PayloadBytes: benchPayload, Logger: log})
	sink := file.New(file.Config{Path: filepath.Join(dir, "events.jsonl"), Logger: log})
	p := pipeline.New(pipeline.Config{Name: "t", Logger: log}, src, encode.Envelope, sink, &checkpoint.Mem{})
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for i, got := range lines[:3] {
		// Rebuild with the clock fields tide wrote, then compare whole lines.
		secs := field(t, got, `"_cluster_time_s":`)
		wall := field(t, got, `"_wall_time_ms":`)
		want := string(baselineLine(nil, int64(i+1), secs, wall, strings.Repeat("x", benchPayload)))
		if got != want {
			t.Errorf("line %d:\n tide     %s baseline %s", i+1, got, want)
		}
	}
}

func field(t *testing.T, line, key string) int64 {
	t.Helper()
	i := strings.Index(line, key)
	if i < 0 {
		t.Fatalf("no %s in %s", key, line)
	}
	rest := line[i+len(key):]
	end := strings.IndexAny(rest, ",}")
	n, err := strconv.ParseInt(rest[:end], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
