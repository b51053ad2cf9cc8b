package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
	natssrc "github.com/tide-cdc/tide/source/nats"
)

// The clock of the rendering tests: 20:38:13.2 UTC.
var progressNow = time.Date(2026, 12, 1, 20, 38, 13, 200_000_000, time.UTC)

func TestDescribeCheckpoint(t *testing.T) {
	committed := pipeline.Stats{LastCheckpoint: cdc.Checkpoint{Source: cdc.Position(`{"_data":"8269..."}`)},
		LastCommit: progressNow.Add(-1500 * time.Millisecond)}
	at := uint32(progressNow.Unix()) // 20:38:13, 0.2 s before now
	long := strings.Repeat("x", 80)
	tests := map[string]struct {
		st   pipeline.Stats
		v    sourceView
		want string
	}{
		"none yet": {pipeline.Stats{}, sourceView{clusterTime: cdc.Timestamp{T: at}}, "checkpoint: none yet"},
		"cluster time and lag": {committed, sourceView{clusterTime: cdc.Timestamp{T: at, I: 4}},
			"at 20:38:13, 0.2 s behind  (checkpoint 1.5 s ago)"},
		"caught up: the lag, not the position's age": {committed, sourceView{clusterTime: cdc.Timestamp{T: at - 12}, lagKnown: true},
			"at 20:38:01, 0.0 s behind  (checkpoint 1.5 s ago)"},
		"minutes behind": {committed, sourceView{clusterTime: cdc.Timestamp{T: at - 185}},
			"at 20:35:08, 3 min 05 s behind  (checkpoint 1.5 s ago)"},
		"a day behind shows the date": {committed, sourceView{clusterTime: cdc.Timestamp{T: at - 86400}},
			"at 2026-11-30 20:38:13, 24 h 00 min behind  (checkpoint 1.5 s ago)"},
		"server clock ahead is not behind": {committed, sourceView{clusterTime: cdc.Timestamp{T: at + 2}},
			"at 20:38:15, 0.0 s behind  (checkpoint 1.5 s ago)"},
		"during the snapshot": {committed, sourceView{copying: true, snapshot: []snapBar{{"d.c", 1, 2}}, clusterTime: cdc.Timestamp{T: at}},
			"checkpoint in the snapshot, 1.5 s ago"},
		"jetstream sequence and pending": {pipeline.Stats{LastCheckpoint: cdc.Checkpoint{Source: cdc.Position(`{"stream_seq":1234}`)},
			LastCommit: progressNow.Add(-12 * time.Second)}, sourceView{jetStream: true, pending: 56},
			"at stream seq 1234, 56 pending  (checkpoint 12 s ago)"},
		"other source shows its position, cut short": {pipeline.Stats{LastCheckpoint: cdc.Checkpoint{Source: cdc.Position(long)},
			LastCommit: progressNow.Add(-300 * time.Millisecond)}, sourceView{},
			"checkpoint " + long[:57] + "... (0.3 s ago)"},
	}
	for name, tc := range tests {
		if got := describeCheckpoint(tc.st, tc.v, progressNow); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, tc.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                       "0.0 s",
		0:                                  "0.0 s",
		230 * time.Millisecond:             "0.2 s",
		9940 * time.Millisecond:            "9.9 s",
		42 * time.Second:                   "42 s",
		61 * time.Second:                   "1 min 01 s",
		59*time.Minute + 59*time.Second:    "59 min 59 s",
		2*time.Hour + 5*time.Minute + 31e9: "2 h 06 min",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestRenderBar(t *testing.T) {
	tests := []struct {
		b    snapBar
		rate float64
		want string
	}{
		{snapBar{"inventory.customers", 120, 400}, 10,
			"snapshot inventory.customers [#########                     ] 120/400 docs  30%  ETA 28 s"},
		{snapBar{"inventory.customers", 0, 400}, 0,
			"snapshot inventory.customers [                              ] 0/400 docs   0%  ETA --"},
		{snapBar{"d.c", 1000, 2000}, 2,
			"snapshot d.c [###############               ] 1000/2000 docs  50%  ETA 8 min 20 s"},
		// An estimate below the count copied counts as the count.
		{snapBar{"d.c", 410, 400}, 5,
			"snapshot d.c [##############################] 410/410 docs 100%  done"},
		{snapBar{"d.empty", 0, 0}, 0,
			"snapshot d.empty [##############################] 0/0 docs 100%  done"},
	}
	for _, tc := range tests {
		if got := renderBar(tc.b, tc.rate); got != tc.want {
			t.Errorf("renderBar(%+v, %v):\n got %q\nwant %q", tc.b, tc.rate, got, tc.want)
		}
	}
}

func TestSnapRates(t *testing.T) {
	r := snapRates{}
	if got := r.rate(snapBar{"d.c", 100, 1000}, progressNow); got != 0 {
		t.Errorf("first sample: rate %v, want 0 (nothing to measure yet)", got)
	}
	if got := r.rate(snapBar{"d.c", 300, 1000}, progressNow.Add(4*time.Second)); got != 50 {
		t.Errorf("rate %v, want 50 docs/s", got)
	}
	if got := r.rate(snapBar{"d.other", 5, 10}, progressNow.Add(4*time.Second)); got != 0 {
		t.Errorf("another collection's first sample: rate %v", got)
	}
}

func TestScreenRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	s := &screen{w: &buf}
	s.draw([]string{"bar a", "bar b", "status"})
	if got, want := buf.String(), "\r\033[Kbar a\n\r\033[Kbar b\n\r\033[Kstatus"; got != want {
		t.Fatalf("first draw %q, want %q", got, want)
	}
	buf.Reset()
	s.draw([]string{"bar a", "bar b", "status 2"})
	if got, want := buf.String(), "\033[2A\r\033[Kbar a\n\r\033[Kbar b\n\r\033[Kstatus 2"; got != want {
		t.Fatalf("redraw %q, want %q", got, want)
	}
	buf.Reset()
	s.draw([]string{"status 3"}) // a shorter block clears what is left below
	if got, want := buf.String(), "\033[2A\r\033[Kstatus 3\n\r\033[K\n\r\033[K\033[2A"; got != want {
		t.Fatalf("shorter draw %q, want %q", got, want)
	}
}

// TestStatusLoopMongo runs a MongoDB pipeline (embedded server, a
// snapshot of 300 documents, then a change) under the status loop, and
// reads what a terminal would show: the collection's bar, finished, then
// the checkpoint as a cluster time.
func TestStatusLoopMongo(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("inventory").Collection("customers")
	var docs []any
	for i := range 300 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := coll.InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := fmt.Appendf(nil, "name: p\nsource: {mongo: {uri: %q, database: inventory, collection: customers}}\n"+
		"sink: {file: {path: %q}}\ndata_dir: %q\nbatch: {commit_interval: 10ms}\n",
		srv.URI(), filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "data"))
	p, err := buildSpec(t.Context(), text, tide.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out testenv.Buffer
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		statusLoop(loopCtx, &out, 5*time.Millisecond, p, "events", nil)
	}()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-time.After(5 * time.Millisecond):
			case err := <-errc:
				t.Fatalf("Run returned early: %v", err)
			case <-ctx.Done():
				t.Fatalf("waiting for %s; the terminal shows:\n%q", what, out.String())
			}
		}
	}
	waitFor("the snapshot", func() bool { return p.Stats().EventsOut >= 300 && p.Stats().LastCheckpoint.Source != nil })
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1000}}); err != nil {
		t.Fatal(err)
	}
	waitFor("the change", func() bool { return p.Stats().EventsOut >= 301 })
	waitFor("the cluster time", func() bool { return strings.Contains(out.String(), " behind  (checkpoint ") })
	stopLoop()
	<-loopDone
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	screen := out.String()
	if !strings.Contains(screen, "snapshot inventory.customers [##############################] 300/300 docs 100%  done") {
		t.Errorf("no finished bar for the collection:\n%q", screen)
	}
	if strings.Contains(screen, `"_data"`) {
		t.Errorf("the status line shows a raw resume token:\n%q", screen)
	}
}

// TestViewOfSources: a JetStream consumer's checkpoint is a stream
// sequence, a core subscription's is not, and the generator adds nothing.
func TestViewOfSources(t *testing.T) {
	now := time.Now()
	js := viewOf(natssrc.New(natssrc.Config{Mode: "jetstream", Stream: "S", Consumer: "c"}), pipeline.Stats{}, now)
	core := viewOf(natssrc.New(natssrc.Config{Mode: "core", Subject: "s.>"}), pipeline.Stats{}, now)
	gen := viewOf(generate.New(generate.Config{Count: 1}), pipeline.Stats{}, now)
	if !js.jetStream || core.jetStream || gen.jetStream || gen.snapshot != nil || gen.clusterTime.T != 0 {
		t.Errorf("views: jetstream %+v, core %+v, generate %+v", js, core, gen)
	}
	if viewOf(nil, pipeline.Stats{}, now).jetStream {
		t.Error("no source has a view")
	}
}
