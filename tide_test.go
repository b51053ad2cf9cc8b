package tide

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// generateYAML describes count generated events written to a file in dir.
func generateYAML(dir string, count int) []byte {
	return fmt.Appendf(nil, `name: gen
source:
  generate: {count: %d}
sink:
  file: {path: %q}
data_dir: %q
`, count, filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "data"))
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"bad value":   {"name: p\nsource:\n  generate: {count: -1}\nsink: {stdout: {}}\n", []string{"line 3: source.generate.count: must not be negative"}},
		"unknown key": {"name: p\nsource: {generate: {}}\nsink:\n  bogus: {}\n", []string{"line 4: sink.bogus: unknown key"}},
		"two errors": {"name: p\nsource:\n  nats: {mode: jetstream}\nsink: {nats: {max_in_flight: -1}}\n",
			[]string{"line 3: source.nats.stream: required", "line 4: sink.nats.stream: required", "line 4: sink.nats.max_in_flight: must not be negative"}},
		"mongo sink": {"name: p\nsource: {generate: {}}\nsink:\n  mongo: {uri: 'mongodb://h', database: d, collection: c, on_write_error: ignore}\n",
			[]string{`line 4: sink.mongo.on_write_error: "ignore" is not one of fail, dead_letter`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), Options{})
			if err == nil {
				t.Fatal("Parse accepted a bad file")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			_, err = build(t.Context(), []byte(tc.yaml), Options{File: "p.yaml"})
			if err == nil || !strings.HasPrefix(err.Error(), "p.yaml: line") {
				t.Errorf("with Options.File, error = %v, want it to start with the file name and line", err)
			}
		})
	}
}

func TestBuildRunsAndReleasesTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := build(t.Context(), generateYAML(dir, 25), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// While p exists, its data directory is taken.
	if _, err := build(t.Context(), generateYAML(dir, 25), Options{}); err == nil {
		t.Fatal("a second pipeline on the same data_dir was built while the first exists")
	}
	if err := p.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := p.State(); got != pipeline.Stopped {
		t.Errorf("state after Run = %v, want Stopped", got)
	}
	if n := lines(t, filepath.Join(dir, "out.jsonl")); n != 25 {
		t.Errorf("file has %d lines, want 25", n)
	}
	// Run released the lock: the directory opens again, at the checkpoint.
	d, err := checkpoint.Open(filepath.Join(dir, "data"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("data dir still locked after Run: %v", err)
	}
	cp, err := d.Load(t.Context(), "gen")
	if err != nil || cp == nil {
		t.Errorf("checkpoint after Run = %v, %v", cp, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseReleasesAPipelineNeverRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := build(t.Context(), generateYAML(dir, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(t.Context(), generateYAML(dir, 1), Options{}); err == nil {
		t.Fatal("a second pipeline on the same data_dir was built while the first exists")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	q, err := build(t.Context(), generateYAML(dir, 1), Options{})
	if err != nil {
		t.Fatalf("after Close, New = %v", err)
	}
	if err := q.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedServerStartsAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	text := fmt.Appendf(nil, `name: emb
source:
  mongo: {uri: embedded, database: shop, collection: orders}
sink:
  file: {path: %q}
data_dir: %q
batch: {commit_interval: 10ms}
`, out, filepath.Join(dir, "data"))
	p, err := build(t.Context(), text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Embedded == nil {
		t.Fatal("uri: embedded started no server")
	}
	addr := p.Embedded.Addr()

	client, err := mongo.Connect(options.Client().ApplyURI(p.Embedded.URI()))
	if err != nil {
		t.Fatal(err)
	}
	coll := client.Database("shop").Collection("orders")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := client.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.Stats().EventsOut < 2 {
		select {
		case <-tick.C:
		case err := <-errc:
			t.Fatalf("Run returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("events committed: %d, want 2", p.Stats().EventsOut)
		}
	}
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Drain = %v", err)
	}
	if n := lines(t, out); n != 2 {
		t.Errorf("file has %d lines, want 2", n)
	}
	// Run stopped the server.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the embedded server still accepts connections on %s after Run", addr)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "embedded")); err != nil {
		t.Errorf("embedded data dir: %v", err)
	}
}

func TestCheckpointsLoadWhileLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := generateYAML(dir, 3)
	load := func(text []byte) (*cdc.Checkpoint, error) {
		spec, err := Parse(text, Options{})
		if err != nil {
			return nil, err
		}
		store, err := spec.Checkpoints(t.Context())
		if err != nil {
			return nil, err
		}
		defer store.Close()
		return store.Load(t.Context())
	}
	cp, err := load(text)
	if err != nil || cp != nil {
		t.Fatalf("before any run: %v, %v; want nil, nil", cp, err)
	}
	p, err := build(t.Context(), text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Another pipeline holds the lock now; Load does not need it.
	q, err := build(t.Context(), generateYAML(dir, 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	cp, err = load(text)
	if err != nil {
		t.Fatal(err)
	}
	if cp == nil || !bytes.Contains(cp.Source, []byte("3")) {
		t.Errorf("checkpoint = %+v, want the position of event 3", cp)
	}
	if _, err := load([]byte("name: p\n")); err == nil {
		t.Error("an invalid file was accepted")
	}
}
