package natskv_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/testenv"
)

type saver interface {
	Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error
}

// benchSaves saves b.N checkpoints of the size a file sink's pipeline
// saves and reports the p50 and p99 of one Save.
func benchSaves(b *testing.B, s saver) {
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		c := cdc.Checkpoint{
			Source: cdc.Position(`{"seq":` + itoa(i) + `}`),
			Sink:   []byte(`{"committed_bytes":` + itoa(i*362000) + `,"crc32c":"1a2b3c4d","tail_crc32c":"5e6f7a8b"}`),
		}
		start := time.Now()
		if err := s.Save(ctx, "bench", c); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSave compares one checkpoint save to an R3 bucket on a
// three-node in-process cluster, to an R1 bucket on one server, and to a
// data directory (one in-place page write and fdatasync).
//
//	go test ./checkpoint/natskv -run '^$' -bench Save -benchtime 2000x
func BenchmarkSave(b *testing.B) {
	b.Run("dir", func(b *testing.B) {
		d, err := checkpoint.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		benchSaves(b, d)
	})
	b.Run("natskv-r1", func(b *testing.B) {
		js := connect(b, testenv.NATS(b).ClientURL())
		benchSaves(b, open(b, js, natskv.Config{}))
	})
	b.Run("natskv-r3", func(b *testing.B) {
		c := testenv.NATSCluster(b, 3)
		js := connect(b, c.URL())
		benchSaves(b, open(b, js, natskv.Config{Replicas: 3}))
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
