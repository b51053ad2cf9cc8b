// Package external uses Tide the way another Go program would: a custom
// Source and Sink run by pipeline.New with checkpoint.Open, driven through
// Pause, Resume and Drain and restarted on the same store; the embedded
// MongoDB-compatible server watched through the official driver; a
// pipeline built from YAML text with tide.Parse and Spec.Build, and a sink
// of its own registered with tide.RegisterSink.
package external

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/mongowire/mongowiretest"
	"github.com/tide-cdc/tide/pipeline"
)

// counter is an endless source of numbered events; its position is the
// number of the last event handed out.
type counter struct {
	next  int
	ready chan struct{}
}

func (c *counter) Open(_ context.Context, restored *cdc.Checkpoint) error {
	c.ready = make(chan struct{})
	close(c.ready) // always ready
	if restored == nil || restored.Source == nil {
		return nil
	}
	n, err := strconv.Atoi(string(restored.Source))
	if err != nil {
		return fmt.Errorf("counter: position %q is not a number", restored.Source)
	}
	c.next = n + 1
	return nil
}

func (c *counter) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	for range max {
		buf = append(buf, cdc.Event{
			Pos: cdc.Position(strconv.Itoa(c.next)), Op: cdc.OpInsert, Namespace: "ext.numbers",
			Payload: []byte(strconv.Itoa(c.next)), PayloadFormat: cdc.PayloadJSON,
		})
		c.next++
	}
	return buf, nil
}

func (c *counter) Ready() <-chan struct{} { return c.ready }
func (c *counter) Close() error           { return nil }

// memory is a sink that keeps what it committed.
type memory struct {
	mu        sync.Mutex // guards committed, read by the test while the pipeline runs
	buffered  []string
	committed []string
	commits   int
}

func (m *memory) Open(context.Context, *cdc.Checkpoint) error { return nil }

func (m *memory) Put(_ context.Context, batch []cdc.Record) error {
	for _, r := range batch {
		m.buffered = append(m.buffered, string(r.Data)) // copied: the batch is not retained
	}
	return nil
}

func (m *memory) Commit(context.Context, cdc.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.committed = append(m.committed, m.buffered...)
	m.buffered = m.buffered[:0]
	m.commits++
	return nil
}

func (m *memory) Close() error { return nil }

func (m *memory) snapshot() (records []string, commits int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.committed...), m.commits
}

func encodePayload(dst []byte, ev *cdc.Event) ([]byte, error) {
	return append(dst, ev.Payload...), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run starts a pipeline over src and sink on store, lets it commit, pauses
// it (nothing is committed while paused), resumes, drains, and returns
// what the sink committed.
func run(t *testing.T, store *checkpoint.Dir, src *counter, sink *memory) []string {
	t.Helper()
	p := pipeline.New(pipeline.Config{Name: "ext", MaxRecords: 100}, src, encodePayload, sink, store)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()

	waitFor(t, "a first commit", func() bool { _, n := sink.snapshot(); return n > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Pause(ctx); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if p.State() != pipeline.Paused {
		t.Fatalf("state after Pause: %v", p.State())
	}
	before, commits := sink.snapshot()
	time.Sleep(200 * time.Millisecond) // paused: a commit now would show
	if after, n := sink.snapshot(); n != commits || len(after) != len(before) {
		t.Fatalf("committed while paused: %d commits and %d records became %d and %d", commits, len(before), n, len(after))
	}
	p.Resume()
	waitFor(t, "a commit after Resume", func() bool { _, n := sink.snapshot(); return n > commits })
	if err := p.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Drain: %v", err)
	}
	if p.State() != pipeline.Stopped {
		t.Fatalf("state after Drain: %v", p.State())
	}
	got, _ := sink.snapshot()
	if out := p.Stats().EventsOut; out != int64(len(got)) {
		t.Fatalf("Stats().EventsOut = %d, the sink committed %d", out, len(got))
	}
	return got
}

func TestCustomSourceAndSink(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := run(t, store, &counter{}, &memory{})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range first {
		if r != strconv.Itoa(i) {
			t.Fatalf("first run: record %d is %q", i, r)
		}
	}

	// A restart on the same store continues at the next position.
	store, err = checkpoint.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	second := run(t, store, &counter{}, &memory{})
	if second[0] != strconv.Itoa(len(first)) {
		t.Fatalf("after %d records the restart began at %q, want %d", len(first), second[0], len(first))
	}
}

func TestMongowireChangeStream(t *testing.T) {
	srv := mongowiretest.StartTest(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "tea"}}); err != nil {
		t.Fatal(err)
	}
	if !cs.Next(ctx) {
		t.Fatalf("no change event: %v", cs.Err())
	}
	var ev struct {
		OperationType string `bson:"operationType"`
		FullDocument  struct {
			Item string `bson:"item"`
		} `bson:"fullDocument"`
	}
	if err := cs.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.OperationType != "insert" || ev.FullDocument.Item != "tea" {
		t.Fatalf("change event %+v", ev)
	}
}

func TestPipelineFromYAML(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	yaml := fmt.Sprintf(`name: from-yaml
data_dir: %s
source:
  generate: {count: 500}
sink:
  file: {path: %s}
`, filepath.Join(dir, "data"), out)
	spec, err := tide.Parse([]byte(yaml), tide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := spec.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines++
	}
	if lines != 500 {
		t.Fatalf("%d lines, want 500", lines)
	}

	// A mistake names the key and its line.
	_, err = tide.Parse([]byte("name: x\nsource:\n  generate: {count: 1}\nsink:\n  fiel: {path: x}\n"), tide.Options{})
	if err == nil {
		t.Fatal("a misspelt sink was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "line 5") || !strings.Contains(msg, "fiel") {
		t.Fatalf("error %q does not name the key and its line", err)
	}
}
