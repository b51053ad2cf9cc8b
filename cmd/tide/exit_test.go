package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestCollectionDroppedExitCode drops the collection under a running
// tide: every change before the drop is committed, and tide exits with
// its own code and a message that names the namespace and the drop.
func TestCollectionDroppedExitCode(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	ctx := context.Background()
	coll := client.Database("shop").Collection("orders")
	if err := client.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: dropped
source:
  mongo: {uri: %q, database: shop, collection: orders, snapshot: never, max_await: 100ms}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`, srv.URI()))
	cmd := tideCmd(t, dir, "run", "-f", cfg)
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // a no-op once it exited
	var stderr strings.Builder
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "pipeline started") {
			break // the stream is open: what is written from here on is streamed
		}
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
		}
	}()
	for i := range 3 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	<-copied
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInvalidated {
		t.Fatalf("tide run after the collection was dropped: %v, want exit code %d\n%s", err, exitInvalidated, stderr.String())
	}
	for _, want := range []string{"change stream invalidated on shop.orders", "after a drop event", "tide checkpoint reset"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("output does not say %q:\n%s", want, stderr.String())
		}
	}
	lines, err := countLines(filepath.Join(dir, "out.jsonl"))
	if err != nil || lines < 3 {
		t.Fatalf("out.jsonl has %d lines (%v), want the 3 inserts and the drop", lines, err)
	}
	// The invalidate itself is committed: the checkpoint is past it.
	out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, "start_after_token") {
		t.Fatalf("checkpoint show (%v) does not hold the invalidate's start_after_token:\n%s", err, out)
	}
}
