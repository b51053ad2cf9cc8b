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
func benchConsumer(b *testing.B, js jetstream.JetStream, name string) jetstream.Consumer {
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

func newLineFile(b *testing.B) *lineFile {
	f, err := os.Create(filepath.Join(b.TempDir(), "plain.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	return &lineFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
}

func (l *lineFile) sync(b *testing.B) {
	if err := l.w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := l.f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkJetStreamToFile reads an already published stream of 256-byte
// messages into a JSON-lines file, acknowledging only what is on disk:
// with two plain nats.go loops (Consume callbacks; Fetch(500)) and with
// Tide (this source, the runtime, the envelope encoder, the file sink and
// a checkpoint directory). Run with -benchtime=1x; compare msgs/s.
func BenchmarkJetStreamToFile(b *testing.B) {
	n := benchMsgs(b)
	srv := testenv.NATS(b)
	nc := connectTo(b, srv)
	js := newStream(b, nc, "BENCH", "bench.>")
	publish(b, js, "bench.data", 0, n, payload256)
	consumers := 0
	name := func() string { consumers++; return "c" + strconv.Itoa(consumers) }

	b.Run("nats.go-consume", func(b *testing.B) {
		for range b.N {
			cons := benchConsumer(b, js, name())
			out := newLineFile(b)
			done := make(chan struct{})
			var got int
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
				out.w.Write(m.Data())
				out.w.WriteByte('\n')
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
			report(b, n, start, cpu0)
			cc.Stop()
			<-cc.Closed()
		}
	})

	b.Run("nats.go-fetch500", func(b *testing.B) {
		for range b.N {
			cons := benchConsumer(b, js, name())
			out := newLineFile(b)
			start, cpu0 := time.Now(), cpuTime()
			got := 0
			msgs := make([]jetstream.Msg, 0, benchBatch)
			for got < n {
				batch, err := cons.Fetch(benchBatch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					b.Fatal(err)
				}
				for m := range batch.Messages() {
					out.w.Write(m.Data())
					out.w.WriteByte('\n')
					msgs = append(msgs, m)
				}
				out.sync(b)
				for _, m := range msgs {
					m.Ack()
				}
				got += len(msgs)
				msgs = msgs[:0]
			}
			report(b, n, start, cpu0)
		}
	})

	b.Run("tide", func(b *testing.B) {
		for range b.N {
			cfg := Config{
				Name: "bench", Conn: nc, Stream: "BENCH", Consumer: name(),
				MaxAckPending: 20000, FetchBatch: benchBatch, Logger: testLogger(b),
			}
			// Pre-create the consumer as the plain loops do.
			benchConsumer(b, js, cfg.Consumer)
			dir := b.TempDir()
			store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), testLogger(b))
			if err != nil {
				b.Fatal(err)
			}
			obs := &countObserver{want: int64(n), done: make(chan struct{})}
			p := pipeline.New(pipeline.Config{Name: "bench", Logger: testLogger(b), Observer: obs, MaxRecords: benchMaxBatch, MaxBytes: 16 << 20},
				New(cfg), encode.Envelope, file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), store)
			start, cpu0 := time.Now(), cpuTime()
			h := pipeline.Start(context.Background(), p)
			select {
			case <-obs.done:
			case <-time.After(10 * time.Minute):
				b.Fatal("not done in 10 minutes")
			}
			report(b, n, start, cpu0)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := h.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			cancel()
			if err := h.Wait(); err != nil {
				b.Fatal(err)
			}
			store.Close()
		}
	})
}

// cpuTime is the CPU time (user and system) this process has used: the
// in-process nats-server's and the contestant's. On a shared machine it is
// steadier than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report reports msgs/s and CPU µs per message since start and cpu0.
func report(b *testing.B, n int, start time.Time, cpu0 time.Duration) {
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n), "cpu-µs/msg")
}

// countObserver closes done once want records were committed.
type countObserver struct {
	want, got int64
	done      chan struct{}
	closed    atomic.Bool
}

func (o *countObserver) Polled(int, int) {}
func (o *countObserver) Committed(records, _ int, _ time.Duration, _ cdc.Checkpoint) {
	if atomic.AddInt64(&o.got, int64(records)) >= o.want && o.closed.CompareAndSwap(false, true) {
		close(o.done)
	}
}
func (o *countObserver) Failed(string, error) {}

// BenchmarkCoreToFile receives n 256-byte messages published as fast as
// one connection can, into a JSON-lines file: a plain Subscribe callback
// writing through a bufio.Writer, and Tide in core mode. Neither may drop
// a message as a slow consumer.
func BenchmarkCoreToFile(b *testing.B) {
	n := benchMsgs(b)
	srv := testenv.NATS(b)
	pub := connectTo(b, srv)
	publishAll := func(b *testing.B) {
		for i := range n {
			if err := pub.Publish("core.data", payload256(i)); err != nil {
				b.Fatal(err)
			}
		}
		pub.Flush()
	}

	b.Run("nats.go-subscribe", func(b *testing.B) {
		for range b.N {
			nc := connectTo(b, srv)
			out := newLineFile(b)
			done := make(chan struct{})
			got := 0
			sub, err := nc.Subscribe("core.data", func(m *nats.Msg) {
				out.w.Write(m.Data)
				out.w.WriteByte('\n')
				if got++; got == n {
					out.sync(b)
					close(done)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			sub.SetPendingLimits(-1, -1)
			nc.Flush()
			start, cpu0 := time.Now(), cpuTime()
			publishAll(b)
			<-done
			report(b, n, start, cpu0)
			if d, _ := sub.Dropped(); d > 0 {
				b.Fatalf("dropped %d", d)
			}
			sub.Unsubscribe()
			nc.Close()
		}
	})

	b.Run("tide", func(b *testing.B) {
		for range b.N {
			dir := b.TempDir()
			store, err := checkpoint.Open(filepath.Join(dir, "ckpt"), testLogger(b))
			if err != nil {
				b.Fatal(err)
			}
			obs := &countObserver{want: int64(n), done: make(chan struct{})}
			src := New(Config{Name: "bench", Servers: []string{srv.ClientURL()}, Mode: "core", Subject: "core.data", Logger: testLogger(b)})
			p := pipeline.New(pipeline.Config{Name: "bench", Logger: testLogger(b), Observer: obs, MaxRecords: benchMaxBatch, MaxBytes: 16 << 20},
				src, encode.Envelope, file.New(file.Config{Path: filepath.Join(dir, "out.jsonl")}), store)
			h := pipeline.Start(context.Background(), p)
			// Wait until the subscription exists: the pipeline opened.
			for h.State() == pipeline.Starting {
				time.Sleep(time.Millisecond)
			}
			start, cpu0 := time.Now(), cpuTime()
			publishAll(b)
			select {
			case <-obs.done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("committed %d of %d in 5 minutes (dropped as a slow consumer?)", atomic.LoadInt64(&obs.got), n)
			}
			report(b, n, start, cpu0)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := h.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			cancel()
			if err := h.Wait(); err != nil {
				b.Fatal(err)
			}
			store.Close()
			if d := src.Stats().Fetched; d != uint64(n) {
				b.Fatalf("fetched %d of %d", d, n)
			}
		}
	})
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
