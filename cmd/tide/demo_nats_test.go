package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDemoNATS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := runTide(t, dir, "demo", "--nats", "--events", "400", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("tide demo --nats: %v\n%s", err, out)
	}
	for _, want := range []string{
		"published 400 orders; streamed 400 messages",
		"orders.created 200 orders.paid 120 orders.shipped 40 orders.cancelled 40",
		"ack floor at stream sequence 400 of 400; 0 pending, 0 delivered and not acknowledged",
		"holds exactly the 400 published messages, in stream order (seq 1..400)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("first demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "resuming") {
		t.Fatalf("first demo says it resumes:\n%s", out)
	}

	out, err = runTide(t, dir, "demo", "--nats", "--events", "300", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("second tide demo --nats: %v\n%s", err, out)
	}
	for _, want := range []string{
		"resuming from the checkpoint: 400 messages already in the file, 400 in the stream",
		"published 300 orders; streamed 300 messages",
		"ack floor at stream sequence 700 of 700; 0 pending, 0 delivered and not acknowledged",
		"holds exactly the 700 published messages, in stream order (seq 1..700)",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("second demo output lacks %q:\n%s", want, out)
		}
	}
	checkNATSDemoFile(t, filepath.Join(dir, "tide-demo", "orders-nats.jsonl"), 700)
}

// checkNATSDemoFile requires path to hold exactly n envelopes of orders
// seq 1..n, each on its subject, independently of the demo's own check.
func checkNATSDemoFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var i int64
	for sc.Scan() {
		i++
		var line struct {
			Namespace string `json:"_namespace"`
			Op        string `json:"_op"`
			Doc       struct {
				Seq   int64  `json:"seq"`
				Order string `json:"order"`
			} `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not valid JSON: %v\n%s", i, err, sc.Bytes())
		}
		if line.Doc.Seq != i || line.Op != "insert" || !strings.HasPrefix(line.Namespace, "orders.") || line.Doc.Order == "" {
			t.Fatalf("line %d: got %s, want an insert on orders.* of order seq %d", i, sc.Bytes(), i)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("file holds %d lines, want %d", i, n)
	}
}

func TestDemoNATSRefuses(t *testing.T) {
	t.Parallel()
	t.Run("no events", func(t *testing.T) {
		t.Parallel()
		out, err := runTide(t, t.TempDir(), "demo", "--nats", "--events", "0", "--progress", "never")
		if err == nil || !strings.Contains(out, "--events 0: want a positive number") {
			t.Fatalf("tide demo --nats --events 0: err %v, output:\n%s", err, out)
		}
	})
	t.Run("foreign message in the stream", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		store := filepath.Join(dir, "tide-demo", "nats")
		// The demo's own server, on the demo's store, with a message the
		// demo did not publish.
		srv, err := startDemoNATS(store)
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := demoStream(ctx, js); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(ctx, "orders.refunded", []byte(`{"refund":1}`)); err != nil {
				t.Fatal(err)
			}
		}()
		out, err := runTide(t, dir, "demo", "--nats", "--events", "10", "--rate", "0", "--progress", "never")
		if err == nil {
			t.Fatalf("tide demo --nats accepted a stream with a foreign message:\n%s", out)
		}
		for _, want := range []string{"stream ORDERS holds messages the demo did not publish", "orders.refunded", "remove tide-demo to start over"} {
			if !strings.Contains(out, want) {
				t.Errorf("error lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestDemoNATSInterrupt stops a demo with SIGINT while it publishes and
// streams, and requires it to drain and say so, and the next run to
// resume and end with every published message in the file exactly once.
func TestDemoNATSInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := interruptDemo(t, dir, "messages", "--nats", "--events", "1000000", "--rate", "2000", "--progress", "always")
	for _, want := range []string{"interrupted: run tide demo --nats again to resume", "published messages, in stream order"} {
		if !strings.Contains(out, want) {
			t.Fatalf("interrupted demo output lacks %q:\n%s", want, out)
		}
	}

	out, err := runTide(t, dir, "demo", "--nats", "--events", "100", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("demo after the interrupt: %v\n%s", err, out)
	}
	var inFile, inStream int64
	i := strings.Index(out, "resuming from the checkpoint: ")
	if i < 0 {
		t.Fatalf("demo after the interrupt does not resume:\n%s", out)
	}
	if _, err := fmt.Sscanf(out[i:], "resuming from the checkpoint: %d messages already in the file, %d in the stream", &inFile, &inStream); err != nil || inStream == 0 {
		t.Fatalf("resume line: %v (in the stream %d)\n%s", err, inStream, out)
	}
	want := fmt.Sprintf("holds exactly the %d published messages, in stream order", inStream+100)
	if !strings.Contains(out, want) {
		t.Fatalf("demo after the interrupt lacks %q:\n%s", want, out)
	}
	checkNATSDemoFile(t, filepath.Join(dir, "tide-demo", "orders-nats.jsonl"), inStream+100)
}
