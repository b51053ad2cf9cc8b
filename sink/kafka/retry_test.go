package kafka_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/kafka"
	"github.com/tide-cdc/tide/source/generate"
)

// freePort returns a port nothing listens on, for a cluster that is
// stopped and started again at the same address.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 20 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

// TestDegradedWhileUnreachable: while the cluster is down the sink
// reports its retries, and the pipeline shows as degraded, naming the
// sink; once the cluster is back, within max_outage, it commits again
// and shows as running.
func TestDegradedWhileUnreachable(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	start := func(opts ...kfake.Opt) *kfake.Cluster {
		// The same port and data: the cluster comes back as it was.
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir), kfake.ClusterID("down")}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start(kfake.SeedTopics(1, "out"))
	defer func() { c.Close() }()

	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline, cfg.Logger, cfg.Topic, cfg.MaxOutage = []string{"127.0.0.1:" + strconv.Itoa(port)}, "down", testLogger(t), "out", 2*time.Minute
	s := kafka.New(cfg)
	p := pipeline.New(pipeline.Config{Name: "down", CommitInterval: 50 * time.Millisecond, Logger: testLogger(t)},
		generate.New(generate.Config{Rate: 200, PayloadBytes: 4}), encode.Envelope, s, &checkpoint.Mem{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() {
		cancel()
		<-errc
		s.Close()
	}()

	waitFor(t, "a first commit", func() bool { return p.Stats().Batches > 0 })
	if h := p.Health(); h.Degraded {
		t.Fatalf("degraded with the cluster up: %+v", h)
	}
	c.Close()
	waitFor(t, "the pipeline to show as degraded", func() bool { return p.State() == pipeline.Degraded })
	if h := p.Health(); h.Component != "sink" || h.Attempts < 1 || h.Err == nil {
		t.Fatalf("health while the cluster is down: %+v; want the sink retrying", h)
	}
	committed := p.Stats().Batches

	c = start()
	waitFor(t, "commits after the cluster is back", func() bool { return p.Stats().Batches > committed+2 })
	waitFor(t, "the pipeline to show as running", func() bool { return p.State() == pipeline.Running })
	if h := p.Health(); h.Degraded {
		t.Fatalf("degraded after the cluster came back: %+v", h)
	}
}
