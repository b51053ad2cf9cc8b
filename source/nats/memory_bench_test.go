package nats

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/pipeline"
)

// BenchmarkJetStreamStalledMemory opens a pipeline on a JetStream backlog
// whose sink does not return from Put: the source, its client library and
// the runtime fill what they may hold and must then stop taking messages,
// so that the process's memory stays within max_buffered_bytes (64 MiB)
// plus the runtime's two batches, and flat. The server runs in a child
// process, so VmRSS is this process's own: the source, the client and the
// runtime. After the stall the sink is released, and every message must
// arrive. max_ack_pending is unlimited, so that the server does not bound
// the deliveries for us.
//
// Full size: TIDE_BENCH_MEM_MSGS=1000000 TIDE_BENCH_STALL=60s (defaults
// 100000 and 10s); TIDE_BENCH_MEM_SIZE sets the message size (256).
//
//	go test ./source/nats -run '^$' -bench JetStreamStalledMemory -benchtime 1x -v
func BenchmarkJetStreamStalledMemory(b *testing.B) {
	n := envInt(b, "TIDE_BENCH_MEM_MSGS", 100_000)
	size := envInt(b, "TIDE_BENCH_MEM_SIZE", 256)
	stall := 10 * time.Second
	if v := os.Getenv("TIDE_BENCH_STALL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("TIDE_BENCH_STALL=%q is not a positive duration", v)
		}
		stall = d
	}
	const budget = 64 << 20
	srv := startNATSProcSync(b, false)
	nc, err := nats.Connect("nats://" + srv.addr())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js := newStream(b, nc, "MEM", "mem.>")
	payload := func(i int) []byte {
		p := fmt.Appendf(make([]byte, 0, size), `{"n":%d,"pad":"`, i)
		p = append(p, bytes.Repeat([]byte{'x'}, max(size-len(p)-2, 0))...)
		return append(p, '"', '}')
	}
	publish(b, js, "mem.data", 0, n, payload)

	for range b.N {
		runtime.GC()
		debug.FreeOSMemory()
		before := rssBytes(b)
		sink := &stalledSink{release: make(chan struct{})}
		obs := &countObserver{want: int64(n), done: make(chan struct{})}
		src := New(Config{
			Name: "mem", Conn: nc, Stream: "MEM", Consumer: "mem" + strconv.Itoa(b.N), MaxAckPending: -1,
			MaxBufferedBytes: budget, Logger: testLogger(b),
		})
		p := pipeline.New(pipeline.Config{Name: "mem", Logger: testLogger(b), Observer: obs}, src, encode.Envelope, sink, nil)
		go p.Run(context.Background()) // its result: p.Err, once p.Done is closed

		var samples []int64
		tick := time.NewTicker(time.Second)
		for range int(stall / time.Second) {
			<-tick.C // sampling memory over the stall
			samples = append(samples, rssBytes(b))
		}
		tick.Stop()
		_, queued := src.queue.queued()
		fetched := src.Stats().Fetched
		close(sink.release)
		select {
		case <-obs.done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("after the stall, %d of %d messages committed in 5 minutes", atomic.LoadInt64(&obs.got), n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := p.Drain(ctx); err != nil { // Run's result
			b.Fatal(err)
		}
		cancel()
		if got := sink.records.Load(); got != int64(n) {
			b.Fatalf("sink got %d records, want %d", got, n)
		}

		var peak int64
		mib := make([]string, len(samples))
		for i, s := range samples {
			peak = max(peak, s)
			mib[i] = strconv.FormatFloat(float64(s)/(1<<20), 'f', 1, 64)
		}
		late := samples[len(samples)/2:]
		lateMin, lateMax := late[0], late[0]
		for _, s := range late {
			lateMin, lateMax = min(lateMin, s), max(lateMax, s)
		}
		bound := int64(1.25*budget) + 40<<20
		b.Logf("%d × %d B backlog, %v stalled: RSS before %.1f MiB, each second (MiB): %s; source queue %.1f MiB, %d messages fetched during the stall",
			n, size, stall, float64(before)/(1<<20), strings.Join(mib, " "), float64(queued)/(1<<20), fetched)
		b.ReportMetric(float64(peak)/(1<<20), "rss_peak_MiB")
		b.ReportMetric(float64(lateMax-lateMin)/(1<<20), "rss_drift_2nd_half_MiB")
		b.ReportMetric(float64(queued)/(1<<20), "queue_MiB")
		if peak > bound {
			b.Errorf("RSS peaked at %.1f MiB, above 1.25 × %d MiB + 40 MiB = %.1f MiB", float64(peak)/(1<<20), budget>>20, float64(bound)/(1<<20))
		}
	}
}

// stalledSink holds every Put until release is closed, then counts what
// it is given.
type stalledSink struct {
	release chan struct{}
	records atomic.Int64
}

func (s *stalledSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *stalledSink) Put(ctx context.Context, batch []cdc.Record) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.records.Add(int64(len(batch)))
	return nil
}
func (s *stalledSink) Commit(context.Context, cdc.Checkpoint) error { return nil }
func (s *stalledSink) Close() error                                 { return nil }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q is not a positive number", name, v)
	}
	return n
}

// rssBytes is this process's resident set size.
func rssBytes(tb testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Skip("no VmRSS")
	return 0
}
