package nats

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
)

// benchMsgs is the number of messages a benchmark moves per iteration:
// TIDE_BENCH_MSGS, default 1,000,000.
func benchMsgs(b *testing.B) int {
	if v := os.Getenv("TIDE_BENCH_MSGS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("TIDE_BENCH_MSGS=%q is not a positive count", v)
		}
		return n
	}
	return 1_000_000
}

// payload256 is a 256-byte JSON document carrying i.
func payload256(i int) []byte {
	p := fmt.Appendf(make([]byte, 0, 256), `{"n":%d,"pad":"`, i)
	for len(p) < 254 {
		p = append(p, 'x')
	}
	return append(p, '"', '}')
}

const benchBatch = 500

// benchMaxBatch is the pipeline's max_batch in the benchmarks: each batch
// costs three fsyncs (the file, the checkpoint file, its directory).
const benchMaxBatch = 5000

// benchConsumer creates a fresh durable consumer reading the whole stream;
// every contestant gets the same configuration.
func benchConsumer(b testing.TB, js jetstream.JetStream, name string) jetstream.Consumer {
	c, err := js.CreateOrUpdateConsumer(context.Background(), "BENCH", benchConsumerConfig(name))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func benchConsumerConfig(name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 20000, AckWait: 30 * time.Second,
	}
}

// lineFile is what the plain loops write: each payload as a line through
// a bufio.Writer, fsynced once per batch.
type lineFile struct {
	f *os.File
	w *bufio.Writer
}

func newLineFile(b testing.TB, path string) *lineFile {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	return &lineFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
}

func (l *lineFile) sync(b testing.TB) {
	if err := l.w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := l.f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkJetStreamToFile reads an already published stream of 256-byte
// messages into a JSON-lines file, acknowledging only what is on disk: a
// plain nats.go Consume loop (fsync per batch of benchBatch, then an ack
// for each message) and Tide (this source, the runtime, the envelope
// encoder, the file sink and a checkpoint directory). Both write the same
// bytes (TestBenchBaselinesWriteTideLines). The contestants run
// TIDE_BENCH_ROUNDS times (default 3) in turn, alternating which goes
// first, against the same server; the metrics are medians, and the ratio
// is the median of the rounds' ratios. Run with -benchtime=1x.
func BenchmarkJetStreamToFile(b *testing.B) {
	n := benchMsgs(b)
	srv := testenv.NATS(b)
	nc := connectTo(b, srv)
	js := newStream(b, nc, "BENCH", "bench.>")
	publish(b, js, "bench.data", 0, n, payload256)
	consumers := 0
	name := func() string { consumers++; return "c" + strconv.Itoa(consumers) }
	for range b.N {
		rounds(b, n,
			func() result {
				return inScratch(b, func(dir string) result {
					return jsConsume(b, benchConsumer(b, js, name()), n, filepath.Join(dir, "plain.jsonl"))
				})
			},
			func() result {
				return inScratch(b, func(dir string) result { return jsTide(b, nc, js, name(), n, dir) })
			})
	}
}

// jsConsume is the plain loop: Consume callbacks writing Tide's lines,
// fsync per benchBatch messages, then an ack for each.
func jsConsume(b testing.TB, cons jetstream.Consumer, n int, path string) result {
	out := newLineFile(b, path)
	done := make(chan struct{})
	var got int
	var line []byte
	pending := make([]jetstream.Msg, 0, benchBatch)
	flush := func() {
		out.sync(b)
		for _, m := range pending {
			m.Ack()
		}
		pending = pending[:0]
	}
	start, cpu0 := time.Now(), cpuTime()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			b.Error(err)
			return
		}
		line = tideLine(line[:0], m.Subject(), meta.Timestamp.UnixMilli(), m.Data())
		out.w.Write(line)
		pending = append(pending, m)
		got++
		if len(pending) == benchBatch || got == n {
			flush()
		}
		if got == n {
			close(done)
		}
	}, jetstream.PullMaxMessages(benchBatch))
	if err != nil {
		b.Fatal(err)
	}
	<-done
	r := since(n, start, cpu0)
	cc.Stop()
	<-cc.Closed()
	out.f.Close()
	return r
}

// jsTide moves the stream through a Tide pipeline, fresh consumer name.
func jsTide(b testing.TB, nc *nats.Conn, js jetstream.JetStream, consumer string, n int, dir string) result {
	cfg := Config{
		Name: "bench", Conn: nc, Stream: "BENCH", Consumer: consumer,
		MaxAckPending: 20000, FetchBatch: benchBatch, Logger: testLogger(b),
	}
	if v := os.Getenv("TIDE_BENCH_MAX_ACK_PENDING"); v != "" {
		cfg.MaxAckPending, _ = strconv.Atoi(v)
	}
	// Pre-create the consumer as the plain loop does.
	cons := benchConsumer(b, js, cfg.Consumer)
	if os.Getenv("TIDE_BENCH_ACK_PENDING") == "" {
		return runTide(b, New(cfg), n, nil, dir)
	}
	// Sample the server's count of delivered, unacknowledged messages.
	stop := make(chan struct{})
	var peak, stalls atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			info, err := cons.Info(context.Background())
			if err != nil {
				continue
			}
			if int64(info.NumAckPending) > peak.Load() {
				peak.Store(int64(info.NumAckPending))
			}
			if info.NumAckPending >= cfg.MaxAckPending {
				stalls.Add(1)
			}
		}
	}()
	r := runTide(b, New(cfg), n, nil, dir)
	close(stop)
	<-done
	b.Logf("ack pending: peak %d of max %d; at the max in %d samples of 20 ms", peak.Load(), cfg.MaxAckPending, stalls.Load())
	return r
}

// runTide runs src through the runtime into a file with a checkpoint
// directory until n records are committed, writing dir/out.jsonl;
// before, if not nil, starts the load once the pipeline runs.
func runTide(b testing.TB, src *Source, n int, before func(), dir string) result {
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var ckpt pipeline.Checkpointer = store
	if os.Getenv("TIDE_BENCH_MEM_CHECKPOINT") != "" { // to see what the durable checkpoint costs
		ckpt = &checkpoint.Mem{}
	}
	obs := &countObserver{want: int64(n), done: make(chan struct{})}
	p := pipeline.New(pipeline.Config{Name: "bench", Logger: testLogger(b), Observer: obs, MaxRecords: benchMaxBatch, MaxBytes: 16 << 20},
		src, encode.Envelope, file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), ckpt)
	go p.Run(context.Background()) // its result: p.Err, once p.Done is closed
	select {
	case <-p.Opened(): // the subscription exists
	case <-p.Done():
		b.Fatalf("run: %v", p.Err())
	}
	start, cpu0 := time.Now(), cpuTime()
	if before != nil {
		before()
	}
	select {
	case <-obs.done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("committed %d of %d in 10 minutes", atomic.LoadInt64(&obs.got), n)
	}
	r := since(n, start, cpu0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Drain(ctx); err != nil { // Run's result
		b.Fatal(err)
	}
	if d := src.Stats().Fetched; d != uint64(n) {
		b.Fatalf("fetched %d of %d", d, n)
	}
	r.batches = p.Stats().Batches
	r.commitMS = float64(obs.took.Load()) / float64(max(r.batches, 1)) / 1e6
	return r
}

// inScratch runs one contestant in a directory of its own and removes
// the directory after, so that no round shares the disk with the
// write-back or the blocks of an earlier round's file.
func inScratch(b *testing.B, run func(dir string) result) result {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	return run(dir)
}

// result is one contestant's run.
type result struct {
	msgsPerSec float64
	cpuPerMsg  float64 // µs, this process (the in-process server included)
	batches    int64   // Tide's committed batches
	commitMS   float64 // Tide's mean put+commit+save time per batch
}

func since(n int, start time.Time, cpu0 time.Duration) result {
	return result{
		msgsPerSec: float64(n) / time.Since(start).Seconds(),
		cpuPerMsg:  float64((cpuTime() - cpu0).Microseconds()) / float64(n),
	}
}

// rounds runs base and tide TIDE_BENCH_ROUNDS times in turn, alternating
// which goes first, logs each round and reports the medians.
// TIDE_BENCH_ONLY=tide or baseline runs only that one, for a profile.
func rounds(b *testing.B, n int, base, tide func() result) {
	k := 3
	if v := os.Getenv("TIDE_BENCH_ROUNDS"); v != "" {
		var err error
		if k, err = strconv.Atoi(v); err != nil || k <= 0 {
			b.Fatalf("TIDE_BENCH_ROUNDS=%q is not a positive count", v)
		}
	}
	switch os.Getenv("TIDE_BENCH_ONLY") { // for a profile of one contestant
	case "tide":
		for range k {
			b.ReportMetric(tide().msgsPerSec, "tide-msgs/s")
		}
		return
	case "baseline":
		for range k {
			b.ReportMetric(base().msgsPerSec, "base-msgs/s")
		}
		return
	}
	var bs, ts, ratios, bcpu, tcpu []float64
	for i := range k {
		var br, tr result
		if i%2 == 0 {
			br, tr = base(), tide()
		} else {
			tr, br = tide(), base()
		}
		bs, ts = append(bs, br.msgsPerSec), append(ts, tr.msgsPerSec)
		bcpu, tcpu = append(bcpu, br.cpuPerMsg), append(tcpu, tr.cpuPerMsg)
		ratios = append(ratios, tr.msgsPerSec/br.msgsPerSec)
		b.Logf("round %d, %d msgs: baseline %.0f msgs/s (%.2f cpu-µs/msg), tide %.0f msgs/s (%.2f cpu-µs/msg, %d batches, %.1f ms each): %.2fx",
			i+1, n, br.msgsPerSec, br.cpuPerMsg, tr.msgsPerSec, tr.cpuPerMsg, tr.batches, tr.commitMS, ratios[i])
	}
	b.ReportMetric(testenv.Median(bs), "base-msgs/s")
	b.ReportMetric(testenv.Median(ts), "tide-msgs/s")
	b.ReportMetric(testenv.Median(bcpu), "base-cpu-µs/msg")
	b.ReportMetric(testenv.Median(tcpu), "tide-cpu-µs/msg")
	b.ReportMetric(testenv.Median(ratios), "ratio")
}

// tideLine appends the line Tide's envelope encoder and file sink write
// for a JSON message without headers, built by hand: the baselines do
// the least work that yields the same bytes. subject must need no JSON
// escaping, and the payload no line-break replacement.
func tideLine(dst []byte, subject string, wallMS int64, payload []byte) []byte {
	dst = append(dst, `{"_namespace":"`...)
	dst = append(dst, subject...)
	dst = append(dst, `","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":`...)
	dst = strconv.AppendInt(dst, wallMS, 10)
	dst = append(dst, `,"_full_document":`...)
	dst = append(dst, payload...)
	dst = append(dst, `,"_update_desc":null,"_resume_token":null}`...)
	return append(dst, '\n')
}

// cpuTime is the CPU time (user and system) this process has used: the
// in-process nats-server's and the contestant's. On a shared machine it is
// steadier than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countObserver closes done once want records were committed.
type countObserver struct {
	want, got int64
	took      atomic.Int64 // put, commit and save time of every batch, summed
	done      chan struct{}
	closed    atomic.Bool
}

func (o *countObserver) Polled(int, int) {}
func (o *countObserver) Committed(records, _ int, took time.Duration, _ cdc.Checkpoint) {
	o.took.Add(int64(took))
	if atomic.AddInt64(&o.got, int64(records)) >= o.want && o.closed.CompareAndSwap(false, true) {
		close(o.done)
	}
}
func (o *countObserver) Failed(string, error) {}

// BenchmarkCoreToFile receives n 256-byte messages published as fast as
// one connection can, into a JSON-lines file: a plain Subscribe callback
// writing Tide's lines through a bufio.Writer, and Tide in core mode.
// Both make the same bytes durable the same way (coreSyncPolicy), and
// neither may drop a message as a slow consumer. Rounds and metrics as in
// BenchmarkJetStreamToFile.
func BenchmarkCoreToFile(b *testing.B) {
	n := benchMsgs(b)
	srv := testenv.NATS(b)
	pub := connectTo(b, srv)
	publishAll := func() {
		for i := range n {
			if err := pub.Publish("core.data", payload256(i)); err != nil {
				b.Fatal(err)
			}
		}
		pub.Flush()
	}
	for range b.N {
		rounds(b, n,
			func() result {
				return inScratch(b, func(dir string) result {
					return coreSubscribe(b, srv.ClientURL(), n, publishAll, filepath.Join(dir, "plain.jsonl"))
				})
			},
			func() result {
				src := New(Config{Name: "bench", Servers: []string{srv.ClientURL()}, Mode: "core", Subject: "core.data", Logger: testLogger(b)})
				return inScratch(b, func(dir string) result { return runTide(b, src, n, publishAll, dir) })
			})
	}
}

// coreSubscribe is the plain loop. Its fsync policy is Tide's batch rule
// with max_records benchMaxBatch: a batch is made durable when it is full
// or when the reader caught up (nothing is waiting in the client), so no
// record waits for its fsync behind a later one, and the last batch is
// synced when the last message arrives.
func coreSubscribe(b testing.TB, url string, n int, publishAll func(), path string) result {
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	out := newLineFile(b, path)
	defer out.f.Close()
	done := make(chan struct{})
	got, inBatch := 0, 0
	var line []byte
	var sub *nats.Subscription
	sub, err = nc.Subscribe("core.data", func(m *nats.Msg) {
		line = tideLine(line[:0], m.Subject, time.Now().UnixMilli(), m.Data)
		out.w.Write(line)
		got++
		inBatch++
		if inBatch == benchMaxBatch || got == n || caughtUp(sub) {
			out.sync(b)
			inBatch = 0
		}
		if got == n {
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	nc.Flush()
	start, cpu0 := time.Now(), cpuTime()
	publishAll()
	<-done
	r := since(n, start, cpu0)
	if d, _ := sub.Dropped(); d > 0 {
		b.Fatalf("dropped %d", d)
	}
	sub.Unsubscribe()
	return r
}

// caughtUp reports whether no message waits in the client for sub.
func caughtUp(sub *nats.Subscription) bool {
	msgs, _, err := sub.Pending()
	return err == nil && msgs == 0
}

// BenchmarkRestartToFirstDelivery measures a restart after a crash: the
// last reader left messages delivered and unacknowledged (ack_wait 30s),
// and the next one opens at its checkpoint. One op is Open through the
// first event handed out.
func BenchmarkRestartToFirstDelivery(b *testing.B) {
	s := testenv.NATS(b)
	nc := connectTo(b, s)
	js := newStream(b, nc, "ORDERS", "orders.>")
	publishJSON(b, js, "orders.eu", 0, 2*b.N+200)
	cfg := jsConfig(b, nc, "ORDERS", "tide")
	cfg.AckWait = 30 * time.Second
	cfg.Logger = slog.New(slog.DiscardHandler)
	var restored *cdc.Checkpoint
	var crashed []cdc.Event
	b.ResetTimer()
	for range b.N {
		src := New(cfg)
		if err := src.Open(context.Background(), restored); err != nil {
			b.Fatal(err)
		}
		got := pollN(b, src, 2) // the first is the restart's figure; the second is "in flight" at the crash
		b.StopTimer()
		if crashed != nil && streamSeq(b, got[0]) != streamSeq(b, crashed[1]) {
			b.Fatalf("restart delivered stream sequence %d first, want %d", streamSeq(b, got[0]), streamSeq(b, crashed[1]))
		}
		// Crash: the checkpoint names the first event; the second stays
		// unacknowledged on the server.
		restored = &cdc.Checkpoint{Source: got[0].Pos, Meta: src.Identity()}
		crashed = got
		src.Close()
		b.StartTimer()
	}
}
