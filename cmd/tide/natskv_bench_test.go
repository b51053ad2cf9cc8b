package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/testenv"
)

// BenchmarkEndToEndNATSKV compares generate → file at max_records: 1000
// with the checkpoint in an R3 NATS KV bucket (three in-process nodes)
// against the local durable store, in the same run. Each op is one event.
//
//	go test ./cmd/tide -run '^$' -bench EndToEndNATSKV -benchtime 300000x -count 3
func BenchmarkEndToEndNATSKV(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		b.SetBytes(lineBytes())
		dir := b.TempDir()
		store, err := checkpoint.Open(filepath.Join(dir, ".tide"), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		runTidePipeline(b, dir, b.N, store)
	})
	// The control: the local store with an idle three-node cluster in the
	// process, to separate the cluster's own CPU from the saves' cost.
	b.Run("local-cluster-idle", func(b *testing.B) {
		b.StopTimer()
		testenv.NATSCluster(b, 3)
		dir := b.TempDir()
		store, err := checkpoint.Open(filepath.Join(dir, ".tide"), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		b.SetBytes(lineBytes())
		b.StartTimer()
		runTidePipeline(b, dir, b.N, store)
	})
	for _, r := range []int{1, 3} {
		b.Run("nats-kv-r"+strconv.Itoa(r), func(b *testing.B) {
			b.StopTimer()
			url := testenv.NATS(b).ClientURL()
			if r == 3 {
				url = testenv.NATSCluster(b, 3).URL()
			}
			nc, err := nats.Connect(url)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			store, err := natskv.Open(ctx, js, natskv.Config{Replicas: r})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(lineBytes())
			b.StartTimer()
			runTidePipeline(b, b.TempDir(), b.N, store)
		})
	}
}
