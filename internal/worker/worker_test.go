package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startWorker runs a Worker in process until the test ends, building
// pipelines with tide.Parse and Spec.Build, and returns it with its Run error channel.
func startWorker(t *testing.T, js jetstream.JetStream, dir, id string) (*Worker, chan error) {
	t.Helper()
	b, err := OpenBuckets(t.Context(), js, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	w := New(Config{
		ID: id, Host: "test", LeaseTTL: time.Second, Dir: dir, Buckets: b, Logger: log,
		Parse: func(origin string, text []byte) (string, error) {
			spec, err := tide.Parse(text, tide.Options{File: origin})
			if err != nil {
				return "", err
			}
			return spec.Name, nil
		},
		Build: func(ctx context.Context, def Definition, _ Lease, reg prometheus.Registerer) (Runner, error) {
			spec, err := tide.Parse(def.Text, tide.Options{File: def.Origin, Logger: log, Metrics: reg})
			if err != nil {
				return nil, err
			}
			return spec.Build(ctx)
		},
	})
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w, errc
}

func holders(t *testing.T, kv jetstream.KeyValue) map[string]int {
	t.Helper()
	out := map[string]int{}
	keys, _ := kv.Keys(context.Background())
	for _, k := range keys {
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			continue
		}
		var r LeaseRecord
		if err := json.Unmarshal(e.Value(), &r); err == nil {
			out[r.Worker]++
		}
	}
	return out
}

func eventually(t *testing.T, what string, within time.Duration, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestWorkersRebalanceAndHandOver: one worker takes all four pipelines; a
// second joins and takes half; the second drains and the first holds all
// four again within a second; the first drains and no lease is left.
func TestWorkersRebalanceAndHandOver(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "pipelines")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		body := fmt.Sprintf("name: p%d\nsource: {generate: {rate: 200}}\nsink: {file: {path: %s}}\ndata_dir: %s\nbatch: {commit_interval: 20ms}\n",
			i, filepath.Join(dir, fmt.Sprintf("p%d.jsonl", i)), filepath.Join(dir, fmt.Sprintf("p%d-data", i)))
		if err := os.WriteFile(filepath.Join(pdir, fmt.Sprintf("p%d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pdir, "bad.yaml"), []byte("name: bad\nsource: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w1, err1 := startWorker(t, js, pdir, "w1")
	b, err := OpenBuckets(t.Context(), js, time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "w1 holds all four", 10*time.Second, func() bool { return holders(t, b.Leases)["w1"] == 4 })
	w2, err2 := startWorker(t, js, pdir, "w2")
	eventually(t, "two each after w2 joins", 10*time.Second, func() bool {
		h := holders(t, b.Leases)
		return h["w1"] == 2 && h["w2"] == 2
	})
	if err := w2.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-err2; err != nil {
		t.Fatalf("w2's Run after Drain: %v", err)
	}
	took := eventually(t, "w1 holds all four again", 5*time.Second, func() bool { return holders(t, b.Leases)["w1"] == 4 })
	if took > time.Second {
		t.Errorf("hand-over on Drain took %s, want under 1s", took)
	}
	if err := w1.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-err1; err != nil {
		t.Fatalf("w1's Run after Drain: %v", err)
	}
	if h := holders(t, b.Leases); len(h) != 0 {
		t.Errorf("leases left after both drained: %v", h)
	}
}
