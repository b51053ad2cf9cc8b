package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// benchPositions are reused positions, so that making events costs the
// producer nothing.
var benchPositions = func() []cdc.Position {
	ps := make([]cdc.Position, 4096)
	for i := range ps {
		ps[i] = pos(i)
	}
	return ps
}()

// hashEncode is a CPU-bound encode: SHA-256 over the payload four times.
func hashEncode(dst []byte, ev *cdc.Event) ([]byte, error) {
	var acc [sha256.Size]byte
	for range 4 {
		sum := sha256.Sum256(ev.Payload)
		for i := range acc {
			acc[i] ^= sum[i] + byte(i)
		}
	}
	dst = append(dst, `{"pos":`...)
	dst = append(dst, ev.Pos...)
	dst = append(dst, `,"sum":"`...)
	dst = hex.AppendEncode(dst, acc[:])
	return append(dst, `"}`...), nil
}

// BenchmarkEncode measures the ordered encode pool on a CPU-bound encode,
// per event, checking the order and positions of every record it sends.
func BenchmarkEncode(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { benchEncode(b, workers) })
	}
}

var posPrefix = []byte(`{"pos":`)

func benchEncode(b *testing.B, workers int) {
	const chunkEvents = 64
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	free := make(chan *chunk, 4*workers+4)
	for range cap(free) {
		free <- &chunk{Events: make([]cdc.Event, 0, chunkEvents)}
	}
	in := make(chan *chunk, workers)
	out := make(chan *chunk, workers)
	errc := make(chan error, 1)
	b.SetBytes(int64(len(payload)))
	cpu := cpuTime()
	b.ResetTimer()

	go func() { // produce: the only sender on in
		defer close(in)
		for sent := 0; sent < b.N; {
			c := <-free
			c.Events = c.Events[:0]
			for j := 0; j < chunkEvents && sent < b.N; j++ {
				c.Events = append(c.Events, cdc.Event{Pos: benchPositions[sent%len(benchPositions)], Op: cdc.OpInsert, Payload: payload, ClusterTime: cdc.Timestamp{I: uint32(sent)}})
				sent++
			}
			in <- c
		}
	}()
	go func() { errc <- encodeOrdered(context.Background(), workers, hashEncode, in, out) }()

	next := 0
	var failure error
	for c := range out {
		for i := range c.Records {
			r := &c.Records[i]
			if failure == nil && (int(r.ClusterTime.I) != next || !bytes.HasPrefix(r.Data, posPrefix) || !bytes.HasPrefix(r.Data[len(posPrefix):], r.Pos)) {
				failure = fmt.Errorf("record %d carries event %d (position %s)", next, r.ClusterTime.I, r.Pos)
			}
			next++
		}
		if failure == nil && string(c.lastPos()) != string(benchPositions[(next-1)%len(benchPositions)]) {
			failure = fmt.Errorf("chunk ending at record %d has position %s", next-1, c.lastPos())
		}
		free <- c
	}
	b.StopTimer()
	// On a shared machine wall time says little about scaling; CPU time
	// per event says what the pool costs: with 2 workers it should stay
	// that of 1.
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/event")
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	if failure != nil {
		b.Fatal(failure)
	}
	if next != b.N {
		b.Fatalf("%d records for %d events", next, b.N)
	}
}

// genSource hands out n generated events as fast as asked.
type genSource struct {
	n, next int
	payload []byte
	ready   chan struct{}
}

func (g *genSource) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (g *genSource) Ready() <-chan struct{}                      { return g.ready }
func (g *genSource) Close() error                                { return nil }

func (g *genSource) Poll(_ context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	k := min(max, g.n-g.next)
	for range k {
		buf = append(buf, cdc.Event{Pos: benchPositions[g.next%len(benchPositions)], Op: cdc.OpInsert, Namespace: "db.c", Payload: g.payload, Size: 256})
		g.next++
	}
	if g.next == g.n {
		return buf, cdc.ErrEnd
	}
	return buf, nil
}

// discardSink writes records to a buffered io.Discard, as a file sink
// without the disk would.
type discardSink struct {
	w     *bufio.Writer
	count int
}

func (s *discardSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *discardSink) Close() error                                { return nil }
func (s *discardSink) Commit(context.Context, cdc.Checkpoint) error {
	return s.w.Flush()
}

func (s *discardSink) Put(_ context.Context, batch []cdc.Record) error {
	for i := range batch {
		s.w.Write(batch[i].Data)
		s.w.WriteByte('\n')
	}
	s.count += len(batch)
	return nil
}

// lightEncode is a cheap JSON-ish envelope, so that the runtime's own cost
// shows.
func lightEncode(dst []byte, ev *cdc.Event) ([]byte, error) {
	dst = append(dst, `{"_namespace":`...)
	dst = strconv.AppendQuote(dst, ev.Namespace)
	dst = append(dst, `,"_op":"`...)
	dst = append(dst, ev.Op...)
	dst = append(dst, `","_payload":"`...)
	dst = append(dst, ev.Payload...) // the benchmark's payloads need no escaping
	return append(dst, `"}`...), nil
}

type nopStore struct{}

func (nopStore) Load(context.Context, string) (*cdc.Checkpoint, error) { return nil, nil }
func (nopStore) Save(context.Context, string, cdc.Checkpoint) error    { return nil }

// benchEncodes are the encodes the whole-loop benchmarks run: a cheap one,
// where the runtime's own cost shows, and the CPU-bound one of
// BenchmarkEncode, where parallel encoding shows.
var benchEncodes = []struct {
	name string
	enc  EncodeFunc
}{{"light", lightEncode}, {"hash", hashEncode}}

// BenchmarkPipeline runs the whole loop, per event, from an in-memory
// source to a buffered discard sink; BenchmarkPlainLoop is the same work
// in one plain loop, the baseline.
func BenchmarkPipeline(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 100)
	for _, e := range benchEncodes {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", e.name, workers), func(b *testing.B) {
				src := &genSource{n: b.N, payload: payload, ready: make(chan struct{})}
				sink := &discardSink{w: bufio.NewWriterSize(io.Discard, 64<<10)}
				p := New(Config{Name: "bench", Workers: workers, Logger: discard()}, src, e.enc, sink, nopStore{})
				b.ReportAllocs()
				b.ResetTimer()
				if err := p.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if sink.count != b.N {
					b.Fatalf("sink got %d of %d records", sink.count, b.N)
				}
			})
		}
	}
}

func BenchmarkPlainLoop(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 100)
	for _, e := range benchEncodes {
		b.Run(e.name, func(b *testing.B) {
			src := &genSource{n: b.N, payload: payload}
			w := bufio.NewWriterSize(io.Discard, 64<<10)
			buf := make([]cdc.Event, 0, DefaultMaxRecords)
			var data []byte
			b.ReportAllocs()
			b.ResetTimer()
			for {
				evs, err := src.Poll(context.Background(), buf[:0], DefaultMaxRecords)
				for i := range evs {
					data, _ = e.enc(data[:0], &evs[i])
					w.Write(data)
					w.WriteByte('\n')
				}
				if errors.Is(err, cdc.ErrEnd) {
					break
				}
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkEncodeCeiling encodes the same events on 1 or 2 goroutines with
// no pool, no order and no channels: what the machine gives at best.
func BenchmarkEncodeCeiling(b *testing.B) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64)
	for _, g := range []int{1, 2} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var wg sync.WaitGroup
			for w := range g {
				wg.Go(func() {
					var dst []byte
					ev := cdc.Event{Pos: pos(1), Payload: payload}
					for i := w; i < b.N; i += g {
						dst, _ = hashEncode(dst[:0], &ev)
					}
				})
			}
			wg.Wait()
		})
	}
}
