package mongo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// benchDoc is a typical order document of about 600 bytes.
func benchDoc(i int) bson.D {
	items := bson.A{}
	for j := range 4 {
		items = append(items, bson.D{{Key: "sku", Value: fmt.Sprintf("SKU-%05d", i*7+j)}, {Key: "qty", Value: j + 1}, {Key: "price", Value: 9.99 + float64(j)}})
	}
	return bson.D{
		{Key: "_id", Value: i},
		{Key: "customer", Value: bson.D{{Key: "name", Value: "Ada Lovelace"}, {Key: "email", Value: "ada@example.com"}, {Key: "tier", Value: "gold"}}},
		{Key: "items", Value: items},
		{Key: "total", Value: 123.45},
		{Key: "status", Value: "paid"},
		{Key: "note", Value: strings.Repeat("n", 120)},
		{Key: "created", Value: time.Unix(1700000000+int64(i), 0)},
	}
}

func insertMany(tb testing.TB, coll *mongo.Collection, from, to int) {
	tb.Helper()
	const batch = 1000
	for i := from; i < to; i += batch {
		docs := make([]any, 0, batch)
		for j := i; j < min(i+batch, to); j++ {
			docs = append(docs, benchDoc(j))
		}
		if _, err := coll.InsertMany(context.Background(), docs); err != nil {
			tb.Fatal(err)
		}
	}
}

// replaySource hands out captured events from memory.
type replaySource struct {
	events []cdc.Event
	next   int
	ready  chan struct{}
}

func (r *replaySource) Open(context.Context, *cdc.Checkpoint) error {
	r.next = 0
	r.ready = make(chan struct{})
	close(r.ready)
	return nil
}
func (r *replaySource) Ready() <-chan struct{} { return r.ready }
func (r *replaySource) Close() error           { return nil }
func (r *replaySource) Poll(_ context.Context, buf []cdc.Event, n int) ([]cdc.Event, error) {
	k := min(n, len(r.events)-r.next)
	buf = append(buf, r.events[r.next:r.next+k]...)
	r.next += k
	if r.next == len(r.events) {
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

type discardSink struct{ bytes int }

func (d *discardSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (d *discardSink) Put(_ context.Context, b []cdc.Record) error {
	for _, r := range b {
		d.bytes += len(r.Data)
	}
	return nil
}
func (d *discardSink) Commit(context.Context, cdc.Checkpoint) error { return nil }
func (d *discardSink) Close() error                                 { return nil }

// captureEvents reads n change events from the source into memory.
func captureEvents(b *testing.B, n int) []cdc.Event {
	e := newEnv(b)
	cfg := e.config(b)
	src := New(cfg)
	if err := src.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	insertMany(b, e.coll, 0, n)
	evs, err := pollUntil(b, src, countOps(n))
	if err != nil {
		b.Fatal(err)
	}
	return nonMarkers(evs)[:n]
}

// BenchmarkOrderedDecode runs the runtime's ordered encode pool over
// change events replayed from memory, with 1 and 2 workers.
func BenchmarkOrderedDecode(b *testing.B) {
	const n = 20000
	events := captureEvents(b, n)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				src := &replaySource{events: events}
				p := pipeline.New(pipeline.Config{Name: "bench", Workers: workers, MaxRecords: 1000, MaxBytes: 8 << 20},
					src, encode.Envelope, &discardSink{}, nil)
				start := time.Now()
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "events/s")
		})
	}
}

// BenchmarkEndToEndThroughput reads the same backlog of change events
// from the embedded server into a JSON-lines file, once through the
// source, the runtime and the file sink, and once through a naive
// client (driver Watch, bson.M, encoding/json, bufio).
func BenchmarkEndToEndThroughput(b *testing.B) {
	const n = 20000
	e := newEnv(b)
	// A token before the backlog, from a fresh stream.
	cs, err := e.coll.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetBatchSize(0))
	if err != nil {
		b.Fatal(err)
	}
	start := slices.Clone(cs.ResumeToken())
	cs.Close(context.Background())
	insertMany(b, e.coll, 0, n)

	var tideTime, naiveTime time.Duration
	for b.Loop() {
		dir := b.TempDir()
		t0 := time.Now()
		tideRun(b, e, start, n, filepath.Join(dir, "tide.jsonl"))
		tideTime += time.Since(t0)
		t0 = time.Now()
		naiveRun(b, e, start, n, filepath.Join(dir, "naive.jsonl"))
		naiveTime += time.Since(t0)
	}
	tide := float64(n*b.N) / tideTime.Seconds()
	naive := float64(n*b.N) / naiveTime.Seconds()
	b.ReportMetric(tide, "tide_events/s")
	b.ReportMetric(naive, "naive_events/s")
	b.ReportMetric(tide/naive, "ratio")
}

func tideRun(b *testing.B, e *env, start bson.Raw, n int, out string) {
	cfg := e.config(b)
	probe := New(cfg)
	if err := probe.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	id := probe.Identity()
	probe.Close()
	var store checkpoint.Mem
	if err := store.Save(context.Background(), "bench", cdc.Checkpoint{Source: resumePos(start), Meta: id}); err != nil {
		b.Fatal(err)
	}
	sink := testenv.NewCountingSink(file.New(file.Config{Path: out}), n)
	p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: 1000, MaxBytes: 8 << 20}, New(cfg), encode.Envelope, sink, &store)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-sink.Reached():
	case err := <-done:
		b.Fatalf("run: %v", err)
	}
	cancel()
	<-done
}

func naiveRun(b *testing.B, e *env, start bson.Raw, n int, out string) {
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	cs, err := e.coll.Watch(context.Background(), mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(start).SetBatchSize(1000))
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close(context.Background())
	for i := 0; i < n && cs.Next(context.Background()); i++ {
		var m bson.M
		if err := cs.Decode(&m); err != nil {
			b.Fatal(err)
		}
		j, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		w.Write(j)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

var _ = io.Discard

// BenchmarkEndToEndLatency writes 1,000 inserts a second, each stamped
// with its insert time, and measures insert-to-disk latency through the
// source, the runtime and the file sink (time of the sink's Commit), and,
// in the same run, insert-to-receive latency of a bare Watch loop.
func BenchmarkEndToEndLatency(b *testing.B) {
	// sink=file is the real thing (fsync on every commit); sink=memory
	// shows what the source and the runtime add without the disk.
	b.Run("sink=file", func(b *testing.B) { benchLatency(b, true) })
	b.Run("sink=memory", func(b *testing.B) { benchLatency(b, false) })
}

func benchLatency(b *testing.B, toFile bool) {
	const rate, seconds = 1000, 3
	for b.Loop() {
		e := newEnv(b)
		cfg := e.config(b)
		var mu sync.Mutex
		var pending []int64
		var tideLat, bareLat []time.Duration
		var inner cdc.Sink = &discardSink{}
		if toFile {
			inner = file.New(file.Config{Path: filepath.Join(b.TempDir(), "lat.jsonl")})
		}
		sink := &latencySink{Sink: inner}
		sink.onPut = func(recs []cdc.Record) {
			for _, r := range recs {
				if ts, ok := bson.Raw(r.FullDocument).Lookup("ts").Int64OK(); ok {
					pending = append(pending, ts)
				}
			}
		}
		sink.onCommit = func() {
			now := time.Now().UnixNano()
			mu.Lock()
			for _, ts := range pending {
				tideLat = append(tideLat, time.Duration(now-ts))
			}
			mu.Unlock()
			pending = pending[:0]
		}
		p := pipeline.New(pipeline.Config{Name: "lat"}, New(cfg), encode.Envelope, sink, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { p.Run(ctx) })
		cs, err := e.coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream())
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer cs.Close(context.Background())
			for cs.Next(ctx) {
				if ts, ok := cs.Current.Lookup("fullDocument", "ts").Int64OK(); ok {
					bareLat = append(bareLat, time.Since(time.Unix(0, ts)))
				}
			}
		})
		time.Sleep(200 * time.Millisecond) // let both streams open
		tick := time.NewTicker(time.Second / rate)
		for i := range rate * seconds {
			<-tick.C
			if _, err := e.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "ts", Value: time.Now().UnixNano()}, {Key: "pad", Value: strings.Repeat("p", 200)}}); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		time.Sleep(500 * time.Millisecond) // let the last events arrive
		cancel()
		wg.Wait()
		mu.Lock()
		tp50, tp99 := percentile(tideLat, 50), percentile(tideLat, 99)
		mu.Unlock()
		bp50, bp99 := percentile(bareLat, 50), percentile(bareLat, 99)
		b.ReportMetric(float64(tp50.Microseconds())/1000, "tide_p50_ms")
		b.ReportMetric(float64(tp99.Microseconds())/1000, "tide_p99_ms")
		b.ReportMetric(float64(bp50.Microseconds())/1000, "bare_p50_ms")
		b.ReportMetric(float64(bp99.Microseconds())/1000, "bare_p99_ms")
		b.ReportMetric(float64(len(tideLat)), "tide_events")
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// latencySink wraps a sink, reporting records put and commits done.
type latencySink struct {
	cdc.Sink
	onPut    func([]cdc.Record)
	onCommit func()
}

func (l *latencySink) Put(ctx context.Context, b []cdc.Record) error {
	l.onPut(b)
	return l.Sink.Put(ctx, b)
}

func (l *latencySink) Commit(ctx context.Context, next cdc.Checkpoint) error {
	if err := l.Sink.Commit(ctx, next); err != nil {
		return err
	}
	l.onCommit()
	return nil
}
