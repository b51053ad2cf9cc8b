package nats

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// readPayloads returns the "n" of each line's payload in a JSON-lines file
// written through the envelope encoder.
func readPayloads(t testing.TB, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ns []int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Payload struct{ N int } `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d %q: %v", len(ns)+1, sc.Bytes(), err)
		}
		ns = append(ns, line.Payload.N)
	}
	return ns
}

// TestPipelineToFileOnceInOrder runs JetStream → runtime → file sink, stops
// it with a drain in the middle and restarts it: every message lands once,
// in stream order, and the ack floor covers what the file committed.
func TestPipelineToFileOnceInOrder(t *testing.T) {
	const total = 20000
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, total/2)

	path := filepath.Join(t.TempDir(), "out.jsonl")
	var store checkpoint.Mem
	run := func(until int) {
		t.Helper()
		src := New(jsConfig(t, nc, "ORDERS", "tide"))
		p := pipeline.New(pipeline.Config{Name: "orders", MaxRecords: 500, Logger: testLogger(t)},
			src, encode.Envelope, file.New(file.Config{Path: path}), &store)
		go p.Run(t.Context())            // its result: p.Err, once p.Done is closed
		t.Cleanup(func() { <-p.Done() }) // t.Context is cancelled by then
		eventually(t, "committed", func() bool {
			return p.Stats().EventsOut >= int64(until) || p.State() == pipeline.Failed
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Drain(ctx); err != nil { // Run's result
			t.Fatalf("drain: %v", err)
		}
	}
	run(total / 2)
	publishJSON(t, js, "orders.eu", total/2, total)
	run(total / 2) // the restart delivers the rest

	ns := readPayloads(t, path)
	if len(ns) != total {
		t.Fatalf("file has %d lines, want %d", len(ns), total)
	}
	for i, n := range ns {
		if n != i {
			t.Fatalf("line %d has payload %d", i+1, n)
		}
	}
	cp, _ := store.Load(t.Context(), "orders")
	last, err := parseJSPos(cp.Source)
	if err != nil || last.StreamSeq != total {
		t.Fatalf("checkpoint %s, want stream seq %d", cp.Source, total)
	}
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.AckFloor.Stream != total || info.NumAckPending != 0 {
		t.Fatalf("ack floor %d, pending %d; want %d, 0", info.AckFloor.Stream, info.NumAckPending, total)
	}
}

// blockingSink is a file-less sink whose Commit waits for the test.
type blockingSink struct {
	commit chan error // Commit returns what the test sends
	puts   int
}

func (s *blockingSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *blockingSink) Put(_ context.Context, b []cdc.Record) error { s.puts += len(b); return nil }
func (s *blockingSink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	select {
	case err := <-s.commit:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (s *blockingSink) Close() error { return nil }

// TestPipelineHoldsAcksUntilCommit: while the sink's commit blocks, every
// message of the batch is unacknowledged on the server; when the commit
// fails, they stay so and the next run reads them again.
func TestPipelineHoldsAcksUntilCommit(t *testing.T) {
	s := testenv.NATS(t)
	nc := connectTo(t, s)
	js := newStream(t, nc, "ORDERS", "orders.>")
	publishJSON(t, js, "orders.eu", 0, 200)

	cfg := jsConfig(t, nc, "ORDERS", "tide")
	cfg.AckWait = time.Second
	sink := &blockingSink{commit: make(chan error)}
	var store checkpoint.Mem
	p := pipeline.New(pipeline.Config{Name: "orders", MaxRecords: 200, Logger: testLogger(t)},
		New(cfg), encode.Envelope, sink, &store)
	go p.Run(t.Context())            // its result: p.Err, once p.Done is closed
	t.Cleanup(func() { <-p.Done() }) // t.Context is cancelled by then
	eventually(t, "a batch put", func() bool {
		info, err := tryConsumerInfo(js, "ORDERS", "tide") // created when the pipeline opens the source
		return err == nil && info.NumAckPending == 200
	})
	if info := consumerInfo(t, js, "ORDERS", "tide"); info.AckFloor.Stream != 0 {
		t.Fatalf("ack floor %d while the commit blocks", info.AckFloor.Stream)
	}
	sink.commit <- errors.New("disk on fire")
	<-p.Done()
	err := p.Err()
	if err == nil {
		t.Fatal("pipeline survived a failed commit")
	}
	if cp, _ := store.Load(t.Context(), "orders"); cp != nil {
		t.Fatalf("checkpoint saved after a failed commit: %s", cp.Source)
	}
	info := consumerInfo(t, js, "ORDERS", "tide")
	if info.AckFloor.Stream != 0 {
		t.Fatalf("ack floor %d after a failed commit", info.AckFloor.Stream)
	}
	// Read again by the next run, in order.
	src := openSource(t, cfg, nil)
	for i, ev := range pollN(t, src, 200) {
		if n := number(t, ev); n != i {
			t.Fatalf("after the failure event %d has payload %d", i, n)
		}
	}
}
