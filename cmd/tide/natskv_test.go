package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/testenv"
)

// TestNATSKVCheckpointCrash is the exactly-once test of TestCrashGenerateToFile
// with the checkpoint in an R3 NATS KV bucket on a three-node cluster:
// tide run is SIGKILLed at random moments and restarted each time, and the
// file holds every event exactly once, in order.
func TestNATSKVCheckpointCrash(t *testing.T) {
	const total = 100000
	c := testenv.NATSCluster(t, 3)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: kv-crash
source:
  generate: {count: %d, rate: 40000, payload_bytes: 50}
sink:
  file: {path: ./out/events.jsonl}
batch: {max_records: 1000, commit_interval: 20ms}
checkpoint:
  nats_kv: {servers: [%s], bucket: crash_checkpoints, replicas: 3}
`, total, strings.Join(c.URLs(), ", ")))
	sigkillRuns(t, dir, 5, 150*time.Millisecond, 150*time.Millisecond, "run", "-f", cfg)
	out, err := runTide(t, dir, "run", "-f", cfg)
	if err != nil {
		t.Fatalf("final tide run: %v\n%s", err, out)
	}
	checkSeqFile(t, filepath.Join(dir, "out/events.jsonl"), total)
	out, err = runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, fmt.Sprintf(`"seq": %d`, total)) {
		t.Fatalf("checkpoint show: %v\n%s", err, out)
	}
}

// TestNATSKVCheckpointShowReset runs a pipeline whose checkpoint is in NATS
// KV, then shows it, damages it (tide run refuses, show prints the raw
// record), resets it and runs again from the start.
func TestNATSKVCheckpointShowReset(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: kv.show
source:
  generate: {count: 300}
sink:
  file: {path: ./out.jsonl}
batch: {max_records: 100}
checkpoint: {nats_kv: {servers: [%s]}}
`, srv.ClientURL()))
	if out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "kv.show" has no checkpoint`) {
		t.Fatalf("checkpoint show before a run: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "run", "-f", cfg); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, `"seq": 300`) || !strings.Contains(out, "committed_bytes") {
		t.Fatalf("checkpoint show: %v\n%s", err, out)
	}

	// Damage the record in the bucket.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "tide_checkpoints")
	if err != nil {
		t.Fatalf("the default bucket: %v", err)
	}
	e, err := kv.Get(ctx, "kv.show")
	if err != nil {
		t.Fatalf("the pipeline's key: %v", err)
	}
	bad := bytes.Replace(e.Value(), []byte(`"seq": 300`), []byte(`"seq": 900`), 1)
	if _, err := kv.Put(ctx, "kv.show", bad); err != nil {
		t.Fatal(err)
	}
	out, err = runTide(t, dir, "run", "-f", cfg)
	if err == nil {
		t.Fatalf("tide run accepted a corrupt checkpoint:\n%s", out)
	}
	for _, want := range []string{`NATS KV bucket "tide_checkpoints" key "kv.show" is corrupt (checksum mismatch`, "tide checkpoint reset"} {
		if !strings.Contains(out, want) {
			t.Errorf("tide run's error does not say %q:\n%s", want, out)
		}
	}
	out, err = runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err == nil || !strings.Contains(out, `"seq": 900`) || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("checkpoint show of a corrupt record should print it and fail: %v\n%s", err, out)
	}

	if out, err := runTide(t, dir, "checkpoint", "reset", "-f", cfg, "--yes"); err != nil || !strings.Contains(out, `reset in NATS KV bucket "tide_checkpoints"`) {
		t.Fatalf("checkpoint reset: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, "has no checkpoint") {
		t.Fatalf("checkpoint show after reset: %v\n%s", err, out)
	}
}

// TestNATSKVCheckpointUnreachable requires a clear error naming the
// servers when NATS is not there.
func TestNATSKVCheckpointUnreachable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: kv-down
source: {generate: {count: 1}}
sink: {file: {path: ./out.jsonl}}
checkpoint: {nats_kv: {servers: ["nats://127.0.0.1:1"]}}
`)
	out, err := runTide(t, dir, "run", "-f", cfg)
	if err == nil || !strings.Contains(out, "checkpoint.nats_kv: connect to nats nats://127.0.0.1:1") {
		t.Fatalf("tide run without NATS: %v\n%s", err, out)
	}
}

// TestNATSKVFencedRunStops fences the key of a running tide run as a new
// owner would: the process stops with an error naming the pipeline and
// the new owner, and leaves the new owner's checkpoint alone.
func TestNATSKVFencedRunStops(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: kv-fenced
source: {generate: {count: 1000000, rate: 2000}}
sink: {file: {path: ./out.jsonl}}
batch: {max_records: 50, commit_interval: 10ms}
checkpoint: {nats_kv: {servers: [%s], bucket: fenced_run}}
`, srv.ClientURL()))
	cmd := tideCmd(t, dir, "run", "-f", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := natskv.Open(ctx, js, natskv.Config{Bucket: "fenced_run"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		cp, err := store.Load(ctx, "kv-fenced")
		if err != nil {
			t.Fatal(err)
		}
		if cp != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := store.Fence(ctx, "kv-fenced", "worker-9"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("tide run exited 0 after being fenced")
		}
	case <-ctx.Done():
		t.Fatal("tide run still runs 30s after its checkpoint was fenced")
	}
	for _, want := range []string{`checkpoint of pipeline "kv-fenced" not saved`, `(owner "worker-9")`, "another worker took the pipeline over"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	if owner, _, err := store.Owner(ctx, "kv-fenced"); err != nil || owner != "worker-9" {
		t.Errorf("owner after the refusal = %q, %v", owner, err)
	}
}

// TestNATSKVValidate checks that tide validate reports bad nats_kv
// settings with their lines.
func TestNATSKVValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `name: v
source: {generate: {count: 1}}
sink: {file: {path: ./out.jsonl}}
checkpoint:
  nats_kv:
    servers: ["nats://a b"]
    replicas: 7
`)
	out, err := runTide(t, dir, "validate", "-f", cfg)
	if err == nil {
		t.Fatalf("tide validate accepted it:\n%s", out)
	}
	for _, want := range []string{`line 6: checkpoint.nats_kv.servers[0]: "nats://a b" is not a server URL`, "line 7: checkpoint.nats_kv.replicas: 7 is out of range: want 1 to 5"} {
		if !strings.Contains(out, want) {
			t.Errorf("tide validate does not say %q:\n%s", want, out)
		}
	}
}
