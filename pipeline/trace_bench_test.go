package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkPipelineTracing is BenchmarkPipeline's light encode with
// tracing off, and on at two sample ratios, exporting through a batch
// processor to an exporter that drops the spans: what tracing costs.
func BenchmarkPipelineTracing(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 100)
	for _, tc := range []struct {
		name  string
		ratio float64 // < 0: no tracer
	}{{"off", -1}, {"ratio=0.01", 0.01}, {"ratio=1", 1}} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(b *testing.B) {
				var tracer trace.Tracer
				if tc.ratio >= 0 {
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
						sdktrace.WithSampler(sdktrace.TraceIDRatioBased(tc.ratio)))
					defer tp.Shutdown(context.Background())
					tracer = tp.Tracer("bench")
				}
				src := &genSource{n: b.N, payload: payload, ready: make(chan struct{})}
				sink := &discardSink{w: bufio.NewWriterSize(io.Discard, 64<<10)}
				p := New(Config{Name: "bench", Workers: workers, Logger: discard(), Tracer: tracer}, src, lightEncode, sink, nopStore{})
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
