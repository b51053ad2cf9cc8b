package mongo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

var crashChanges = flag.Int("mongo.crash.changes", 3000, "changes written by TestPipelineHardStops (CI: 100000)")

// change is one write the workload made, as the sink must show it.
type change struct {
	Op cdc.Op
	ID int64
}

// workload writes n changes (inserts, updates, deletes) one after the
// other and returns them in order. It stops early when ctx is done.
//
// progress, when not nil, is called with the number of changes written so far
// after each one.
func workload(ctx context.Context, coll *mongo.Collection, n int, seed uint64, progress func(written int)) ([]change, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var live []int64
	var out []change
	next := int64(0)
	for len(out) < n {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r := rng.IntN(10)
		switch {
		case r < 5 || len(live) < 10:
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: next}, {Key: "v", Value: 0}}); err != nil {
				return out, fmt.Errorf("insert %d: %w", next, err)
			}
			live = append(live, next)
			out = append(out, change{cdc.OpInsert, next})
			next++
		case r < 8:
			id := live[rng.IntN(len(live))]
			if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
				return out, fmt.Errorf("update %d: %w", id, err)
			}
			out = append(out, change{cdc.OpUpdate, id})
		default:
			i := rng.IntN(len(live))
			id := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
				return out, fmt.Errorf("delete %d: %w", id, err)
			}
			out = append(out, change{cdc.OpDelete, id})
		}
		if progress != nil {
			progress(len(out))
		}
	}
	return out, nil
}

// readJSONL returns the changes a JSON-lines file holds.
func readJSONL(t testing.TB, path string) []change {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []change
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Op  cdc.Op `json:"_op"`
			Key struct {
				ID int64 `json:"_id"`
			} `json:"_document_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d of %s: %v: %s", len(out)+1, path, err, sc.Bytes())
		}
		out = append(out, change{line.Op, line.Key.ID})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newPipeline(t testing.TB, cfg Config, out string, store pipeline.Checkpointer) (*pipeline.Pipeline, *Source) {
	src := New(cfg)
	sink := file.New(file.Config{Path: out})
	p := pipeline.New(pipeline.Config{
		Name: "orders", MaxRecords: 500, CommitInterval: 20 * time.Millisecond, Workers: 2,
	}, src, encode.Envelope, sink, store)
	return p, src
}

// The pipeline is hard-stopped at random moments during a workload and
// restarted each time: the file holds every change, in order, once.
func TestPipelineHardStops(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "orders.jsonl")
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The first run admits the source and saves the start position
	// before the writer begins.
	run := func(ctx context.Context) error {
		p, _ := newPipeline(t, e.config(t), out, store)
		return p.Run(ctx)
	}
	startCtx, stopStart := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(startCtx) }()
	waitFor(t, "first checkpoint", func() bool {
		cp, _ := store.Load(context.Background(), "orders")
		return cp != nil
	})
	stopStart()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}

	n := *crashChanges
	wctx, stopWriter := context.WithCancel(t.Context())
	defer stopWriter()
	wrote := make(chan []change, 1)
	werr := make(chan error, 1)
	go func() {
		ch, err := workload(wctx, e.coll, n, 7, nil)
		wrote <- ch
		werr <- err
	}()

	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 10 {
		ctx, cancel := context.WithCancel(t.Context())
		go func() { done <- run(ctx) }()
		time.Sleep(time.Duration(20+rng.IntN(150)) * time.Millisecond) // a random moment to stop at
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	want := <-wrote
	if err := <-werr; err != nil {
		t.Fatalf("workload: %v", err)
	}
	// A last run catches up.
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- run(ctx) }()
	waitFor(t, "all changes in the file", func() bool { return len(readJSONL(t, out)) >= len(want) })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("last run: %v", err)
	}
	got := readJSONL(t, out)
	if len(got) != len(want) {
		t.Fatalf("file holds %d changes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("change %d: file has %v, want %v (lost, duplicated or reordered)", i, got[i], want[i])
		}
	}
}

// History lost: the pipeline stops and the checkpoint stays as it was.
func TestPipelineHistoryLostKeepsCheckpoint(t *testing.T) {
	e := newEnv(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 })
	dir := t.TempDir()
	out := filepath.Join(dir, "orders.jsonl")
	var store checkpoint.Mem
	ctx, cancel := context.WithCancel(t.Context())
	p, _ := newPipeline(t, e.config(t), out, &store)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "first checkpoint", func() bool { return store.Saves() > 0 })
	cancel()
	<-done
	before, _ := store.Load(context.Background(), "orders")

	if _, err := workload(context.Background(), e.coll, 400, 1, nil); err != nil {
		t.Fatal(err)
	}
	p, _ = newPipeline(t, e.config(t), out, &store)
	err := p.Run(t.Context())
	wantErr(t, err, ErrHistoryLost, "re-snapshot")
	after, _ := store.Load(context.Background(), "orders")
	if string(after.Source) != string(before.Source) {
		t.Fatalf("checkpoint moved from %s to %s after history loss", before.Source, after.Source)
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 30s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling files and stores written by other goroutines
	}
}
