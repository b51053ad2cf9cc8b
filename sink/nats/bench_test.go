package nats

import (
	"context"
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
	"github.com/tide-cdc/tide/source/generate"
)

// benchMsgs is TIDE_BENCH_MSGS, default 1,000,000.
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

// BenchmarkGenerateToJetStream publishes n records to a file-storage
// stream and waits for every PubAck: a plain async-publish loop with
// Nats-Msg-Id and a window of 500, and Tide (the generate source, the
// runtime, the envelope encoder and this sink, with a checkpoint
// directory). The plain loop publishes payloads as long as Tide's
// records. Run with -benchtime=1x; compare msgs/s.
func BenchmarkGenerateToJetStream(b *testing.B) {
	n := benchMsgs(b)
	srv := testenv.NATS(b)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	streams := 0
	newStream := func(b *testing.B) string {
		streams++
		name := "B" + strconv.Itoa(streams)
		if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
			Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
		}); err != nil {
			b.Fatal(err)
		}
		return name
	}
	// The length of one of Tide's records.
	ev := cdc.Event{}
	gen := generate.New(generate.Config{Count: 1, PayloadBytes: 100})
	if err := gen.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	evs, _ := gen.Poll(context.Background(), nil, 1)
	gen.Close()
	if len(evs) == 1 {
		ev = evs[0]
	}
	rec, err := encode.Envelope(nil, &ev)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, len(rec))

	b.Run("nats.go-async-publish", func(b *testing.B) {
		for range b.N {
			name := newStream(b)
			start, cpu0 := time.Now(), cpuTime()
			for i := range n {
				m := &nats.Msg{Subject: name + ".data", Data: payload, Header: nats.Header{}}
				if _, err := js.PublishMsgAsync(m, jetstream.WithMsgID("bench:"+strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
				if i%500 == 499 {
					<-js.PublishAsyncComplete()
				}
			}
			<-js.PublishAsyncComplete()
			report(b, n, start, cpu0)
		}
	})

	b.Run("tide", func(b *testing.B) {
		for range b.N {
			name := newStream(b)
			store, err := checkpoint.Open(filepath.Join(b.TempDir(), "ckpt"), nil)
			if err != nil {
				b.Fatal(err)
			}
			sink := New(Config{Pipeline: "bench", Servers: []string{srv.ClientURL()}, Stream: name, Subject: name + ".{db}.{coll}"})
			obs := &countObserver{want: int64(n), done: make(chan struct{})}
			p := pipeline.New(pipeline.Config{Name: "bench", Observer: obs, MaxRecords: benchMaxBatch, MaxBytes: 16 << 20},
				generate.New(generate.Config{Count: int64(n), PayloadBytes: 100}), encode.Envelope, sink, store)
			start, cpu0 := time.Now(), cpuTime()
			if err := p.Run(context.Background()); err != nil { // the generator ends after n
				b.Fatal(err)
			}
			report(b, n, start, cpu0)
			store.Close()
			if got := atomic.LoadInt64(&obs.got); got != int64(n) {
				b.Fatalf("committed %d of %d", got, n)
			}
		}
	})
}

// benchMaxBatch is the pipeline's max_batch in the benchmarks: each batch
// costs a stop-and-wait for its PubAcks and a checkpoint (two fsyncs).
const benchMaxBatch = 5000

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

type countObserver struct {
	want, got int64
	done      chan struct{}
}

func (o *countObserver) Polled(int, int) {}
func (o *countObserver) Committed(records, _ int, _ time.Duration, _ cdc.Checkpoint) {
	atomic.AddInt64(&o.got, int64(records))
}
func (o *countObserver) Failed(string, error) {}
