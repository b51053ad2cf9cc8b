package mongo

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
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
	toKafka, toFile := testenv.Alternate(b,
		func() float64 {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := kafka.DefaultConfig()
			cfg.Brokers, cfg.Pipeline, cfg.Logger = c.ListenAddrs(), "bench", slogDiscard()
			pc := pipeline.Config{MaxRecords: kafka.DefaultMaxRecords, MaxBytes: kafka.DefaultMaxBytes}
			return float64(n) / backlogInto(b, e, start, n, pc, func(string) cdc.Sink { return kafka.New(cfg) }).Seconds()
		},
		func() float64 { return float64(n) / backlogInto(b, e, start, n, pipeline.Config{}, fileSink).Seconds() })
	b.ReportMetric(testenv.Median(toKafka), "kafka_events/s")
	b.ReportMetric(testenv.Median(toFile), "file_events/s")
	b.ReportMetric(testenv.Median(testenv.Ratios(toKafka, toFile)), "ratio")
	b.ReportMetric(0, "ns/op")
}
