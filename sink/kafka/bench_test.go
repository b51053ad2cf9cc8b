package kafka_test

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/kafka"
	"github.com/tide-cdc/tide/source/generate"
)

const benchPayload = 256

// benchCluster starts a kfake cluster for one benchmark.
func benchCluster(b *testing.B) []string {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(6))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()
}

// tideValueSize is the size of the record Tide writes for a generated
// event: the baseline writes records of that size.
func tideValueSize(b *testing.B) int {
	src := generate.New(generate.Config{Count: 1, PayloadBytes: benchPayload, Logger: slog.New(slog.DiscardHandler)})
	if err := src.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	evs, err := src.Poll(context.Background(), nil, 1)
	if len(evs) != 1 {
		b.Fatalf("generate gave %d events: %v", len(evs), err)
	}
	v, err := encode.Envelope(nil, &evs[0])
	if err != nil {
		b.Fatal(err)
	}
	return len(v)
}

// runBare produces n records of size bytes with a bare franz-go loop and
// the sink's settings: acks from all in-sync replicas, idempotent, no
// compression, Java's partitioner, no key, no headers, and a flush after
// every batch of the size Tide's batches have by default.
func runBare(b *testing.B, brokers []string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.RecordDeliveryTimeout(time.Minute), kgo.DefaultProduceTopic("bare"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, -1, -1, nil, "bare"); err != nil {
		b.Fatal(err)
	}
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Store(&err)
		}
	}
	value := make([]byte, size) // the client does not change a value: one serves every record
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, promise)
		if (i+1)%kafka.DefaultMaxRecords == 0 || i == n-1 {
			// Tide's batches: a flush each
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// runTide runs generate → Kafka through the runtime, start included.
func runTide(b *testing.B, brokers []string, n int, exactlyOnce bool) {
	log := slog.New(slog.DiscardHandler)
	no := false
	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Key, cfg.Headers = brokers, "bench", log, kafka.KeyNone, &no
	sink := kafka.New(cfg)
	var store pipeline.Checkpointer = &checkpoint.Mem{}
	if exactlyOnce {
		store = sink.Checkpoints()
	}
	src := generate.New(generate.Config{Count: int64(n), PayloadBytes: benchPayload, Logger: log})
	p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: kafka.DefaultMaxRecords, MaxBytes: kafka.DefaultMaxBytes, Logger: log},
		src, encode.Envelope, sink, store)
	if err := p.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	if got := p.Stats().EventsOut; got != int64(n) {
		b.Fatalf("committed %d events, want %d", got, n)
	}
}

// BenchmarkGenerateToKafka compares, in one run and each on a kfake
// cluster of its own in this process, a bare franz-go producer loop with
// generate → Kafka through Tide, at least once and exactly once. Each op
// is one record.
//
//	go test ./sink/kafka -run '^$' -bench GenerateToKafka -benchtime 1000000x
func BenchmarkGenerateToKafka(b *testing.B) {
	size := tideValueSize(b)
	b.Run("bare-franz-go", func(b *testing.B) {
		b.SetBytes(int64(size))
		runBare(b, benchCluster(b), b.N, size)
	})
	b.Run("tide-at-least-once", func(b *testing.B) {
		b.SetBytes(int64(size))
		runTide(b, benchCluster(b), b.N, false)
	})
	b.Run("tide-exactly-once", func(b *testing.B) {
		b.SetBytes(int64(size))
		runTide(b, benchCluster(b), b.N, true)
	})
}

// BenchmarkGenerateToKafkaRatio runs TIDE_BENCH_RECORDS (default 200000)
// records through the bare loop, through Tide at least once and through
// Tide exactly once, b.N rounds, each arm going first in turn, each on a
// fresh kfake cluster after a collection of the last one's garbage (kfake
// keeps every record in memory, and they share this process's cores). It
// reports the medians and the medians of the per-round ratios: ratio is
// at-least-once/bare, eos_ratio exactly-once/at-least-once.
//
//	go test ./sink/kafka -run '^$' -bench GenerateToKafkaRatio -benchtime 7x
func BenchmarkGenerateToKafkaRatio(b *testing.B) {
	size := tideValueSize(b)
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("TIDE_BENCH_RECORDS")); err == nil && v > 0 {
		n = v
	}
	timed := func(f func([]string)) float64 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(6))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		runtime.GC()
		t0 := time.Now()
		f(c.ListenAddrs())
		return float64(n) / time.Since(t0).Seconds()
	}
	var bare, tide, eos []float64
	for round := 0; b.Loop(); round++ {
		var br, tr, er float64
		arms := []func(){
			func() { br = timed(func(brokers []string) { runBare(b, brokers, n, size) }) },
			func() { tr = timed(func(brokers []string) { runTide(b, brokers, n, false) }) },
			func() { er = timed(func(brokers []string) { runTide(b, brokers, n, true) }) },
		}
		for i := range arms {
			arms[(i+round)%len(arms)]() // each arm goes first in turn
		}
		bare, tide, eos = append(bare, br), append(tide, tr), append(eos, er)
	}
	b.ReportMetric(testenv.Median(bare), "bare_records/s")
	b.ReportMetric(testenv.Median(tide), "tide_records/s")
	b.ReportMetric(testenv.Median(eos), "eos_records/s")
	b.ReportMetric(testenv.Median(testenv.Ratios(tide, bare)), "ratio")
	b.ReportMetric(testenv.Median(testenv.Ratios(eos, tide)), "eos_ratio")
	b.ReportMetric(0, "ns/op")
}
