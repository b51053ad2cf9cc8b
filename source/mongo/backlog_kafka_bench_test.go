package mongo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/sink/kafka"
)

// BenchmarkBacklogToKafka reads the backlog of BenchmarkBacklogToFile
// (TIDE_BENCH_BACKLOG inserts of 1 KiB documents, default 100000)
// through the source and the runtime into Kafka (an in-process kfake
// cluster, at least once, keys and headers on, the sink's default batch
// sizes) and into a file (the default batch sizes), both with a durable
// checkpoint store, b.N rounds taking turns to go first; it reports the
// medians and the ratio Kafka / file.
//
//	go test ./source/mongo -run '^$' -bench BacklogToKafka -benchtime 3x
func BenchmarkBacklogToKafka(b *testing.B) {
	e, start, n := seedBacklog(b, 100_000)
	var toKafka, toFile []float64
	round := 0
	for b.Loop() {
		kafkaRound := func() {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := kafka.DefaultConfig()
			cfg.Brokers, cfg.Pipeline, cfg.Logger = c.ListenAddrs(), "bench", slogDiscard()
			s := testenv.NewCountingSink(kafka.New(cfg), n)
			toKafka = append(toKafka, float64(n)/backlogInto(b, e, start, s, s.Reached(), kafka.DefaultMaxRecords, kafka.DefaultMaxBytes).Seconds())
		}
		fileRound := func() {
			dir := b.TempDir()
			defer os.RemoveAll(dir)
			s := testenv.NewCountingSink(file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), n)
			toFile = append(toFile, float64(n)/backlogInto(b, e, start, s, s.Reached(), 0, 0).Seconds())
		}
		if round%2 == 0 {
			kafkaRound()
			fileRound()
		} else {
			fileRound()
			kafkaRound()
		}
		round++
	}
	ratios := make([]float64, len(toKafka))
	for i := range toKafka {
		ratios[i] = toKafka[i] / toFile[i]
	}
	b.ReportMetric(testenv.Median(toKafka), "kafka_events/s")
	b.ReportMetric(testenv.Median(toFile), "file_events/s")
	b.ReportMetric(testenv.Median(ratios), "ratio")
	b.ReportMetric(0, "ns/op")
}

// backlogInto runs the pipeline into sink until reached is closed and
// returns how long that took from the pipeline's start.
func backlogInto(b *testing.B, e *env, start bson.Raw, sink cdc.Sink, reached <-chan struct{}, maxRecords, maxBytes int) time.Duration {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	cfg := e.config(b)
	cfg.MaxAwait = 0
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
	p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: maxRecords, MaxBytes: maxBytes}, New(cfg), encode.Envelope, sink, store)
	return testenv.RunUntil(b, p.Run, reached)
}
