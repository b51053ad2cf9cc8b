package nats

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestBenchBaselinesWriteTideLines keeps the throughput benchmarks
// honest: each plain loop they measure Tide against writes the very bytes
// Tide writes. JetStream lines are compared whole (the wall time is the
// stream's timestamp); core lines carry the time of receipt, so their
// _wall_time_ms is left out of the comparison.
func TestBenchBaselinesWriteTideLines(t *testing.T) {
	const n = 50
	srv := testenv.NATS(t)
	nc := connectTo(t, srv)

	t.Run("jetstream", func(t *testing.T) {
		js := newStream(t, nc, "BENCH", "bench.>")
		publish(t, js, "bench.data", 0, n, payload256)
		plain := filepath.Join(t.TempDir(), "plain.jsonl")
		jsConsume(t, benchConsumer(t, js, "plain"), n, plain)
		dir := t.TempDir()
		jsTide(t, nc, js, "tide", n, dir)
		sameLines(t, plain, filepath.Join(dir, "out.jsonl"), n, nil)
	})

	t.Run("core", func(t *testing.T) {
		pub := connectTo(t, srv)
		publishAll := func() {
			for i := range n {
				if err := pub.Publish("core.data", payload256(i)); err != nil {
					t.Fatal(err)
				}
			}
			pub.Flush()
		}
		plain := filepath.Join(t.TempDir(), "plain.jsonl")
		coreSubscribe(t, srv.ClientURL(), n, publishAll, plain)
		dir := t.TempDir()
		src := New(Config{Name: "bench", Servers: []string{srv.ClientURL()}, Mode: "core", Subject: "core.data", Logger: testLogger(t)})
		runTide(t, src, n, publishAll, dir)
		sameLines(t, plain, filepath.Join(dir, "out.jsonl"), n, regexp.MustCompile(`"_wall_time_ms":[0-9]+`))
	})
}

// sameLines fails unless both files hold the same n lines, after
// replacing what mask matches.
func sameLines(t *testing.T, plainPath, tidePath string, n int, mask *regexp.Regexp) {
	t.Helper()
	plain, err := os.ReadFile(plainPath)
	if err != nil {
		t.Fatal(err)
	}
	tide, err := os.ReadFile(tidePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(tide, []byte("\n")); got != n {
		t.Fatalf("tide wrote %d lines, want %d", got, n)
	}
	if mask != nil {
		plain = mask.ReplaceAll(plain, []byte("MASKED"))
		tide = mask.ReplaceAll(tide, []byte("MASKED"))
	}
	if !bytes.Equal(plain, tide) {
		pl, tl := bytes.SplitAfter(plain, []byte("\n")), bytes.SplitAfter(tide, []byte("\n"))
		for i := range min(len(pl), len(tl)) {
			if !bytes.Equal(pl[i], tl[i]) {
				t.Fatalf("line %d differs:\n baseline %s tide     %s", i+1, pl[i], tl[i])
			}
		}
		t.Fatalf("baseline wrote %d bytes, tide %d", len(plain), len(tide))
	}
}
