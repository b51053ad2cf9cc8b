package tide

import (
	"context"
	"errors"
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

// kvYAML is a slow generate → file pipeline whose checkpoint is in NATS KV.
func kvYAML(dir, url string) []byte {
	return fmt.Appendf(nil, `name: kv
source:
  generate: {count: 100000, rate: 2000}
sink:
  file: {path: %q}
data_dir: %q
batch: {max_records: 50, commit_interval: 10ms}
checkpoint: {nats_kv: {servers: [%q], bucket: fenced}}
`, filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "data"), url)
}

// TestFencedPipelineStops fences a running pipeline's key as a new owner
// would: the pipeline's next save is refused and Run stops with an error
// naming the pipeline, the revisions and the new owner, and the new
// owner's checkpoint is untouched.
func TestFencedPipelineStops(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	dir := t.TempDir()
	p, err := build(t.Context(), kvYAML(dir, srv.ClientURL()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	store, err := natskv.Open(ctx, js, natskv.Config{Bucket: "fenced"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if cp, err := store.Load(ctx, "kv"); err != nil {
			t.Fatal(err)
		} else if cp != nil {
			break // it has saved
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := store.Fence(ctx, "kv", "worker-b"); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	fenced, err := store.Load(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, natskv.ErrNotOwner) {
		t.Fatalf("Run after the fence = %v; want ErrNotOwner", err)
	}
	for _, want := range []string{`pipeline "kv"`, `owner "worker-b"`, `bucket "fenced"`, "another worker took the pipeline over"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run's error %q does not say %s", err, want)
		}
	}
	after, err := store.Load(ctx, "kv")
	if err != nil || string(after.Source) != string(fenced.Source) {
		t.Fatalf("checkpoint after the refusal = %s, %v; want the fenced %s", after.Source, err, fenced.Source)
	}
	// Options.NATSKV: the pipeline uses the fenced store and goes on from
	// the fenced checkpoint.
	p, err = build(t.Context(), kvYAML(dir, "nats://127.0.0.1:1"), Options{NATSKV: store})
	if err != nil {
		t.Fatalf("New with Options.NATSKV (the file's servers are unreachable and unused): %v", err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	done = make(chan error, 1)
	go func() { done <- p.Run(ctx2) }()
	for {
		cp, err := store.Load(ctx, "kv")
		if err != nil {
			t.Fatal(err)
		}
		if string(cp.Source) != string(fenced.Source) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	owner, _, err := store.Owner(ctx, "kv")
	if err != nil || owner != "worker-b" {
		t.Errorf("owner after the new owner's saves = %q, %v", owner, err)
	}
	cancel2()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run of the new owner: %v", err)
	}
}

// TestCheckpointOwner fences at build time: a pipeline built for w1 and
// overtaken by w2 before it runs refuses to load, and a store that cannot
// be fenced is refused.
func TestCheckpointOwner(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	_, err := buildFenced(t.Context(), generateYAML(t.TempDir(), 10), Options{}, "w1")
	if err == nil || !strings.Contains(err.Error(), `pipeline "gen" cannot be fenced for owner "w1": only a checkpoint in NATS KV can`) {
		t.Fatalf("CheckpointOwner with a data directory store: %v", err)
	}

	p1, err := buildFenced(t.Context(), kvYAML(t.TempDir(), srv.ClientURL()), Options{}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := buildFenced(t.Context(), kvYAML(t.TempDir(), srv.ClientURL()), Options{}, "w2")
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	err = p1.Run(t.Context())
	if !errors.Is(err, natskv.ErrNotOwner) || !strings.Contains(err.Error(), `fenced key "kv" for "w1"`) || !strings.Contains(err.Error(), `owner "w2"`) {
		t.Fatalf("Run of the overtaken pipeline = %v; want a refused load naming w1 and w2", err)
	}
}
