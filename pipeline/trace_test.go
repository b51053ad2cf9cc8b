package pipeline

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// With a tracer, each batch is one tide.batch span with its records,
// bytes, namespaces and position, and one child per stage, in order and
// within the batch's span.
func TestTraceBatches(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	log := &callLog{}
	src := newSource(log, events(0, 250))
	src.end = true
	p := New(Config{Name: "traced", MaxRecords: 100, Workers: 2, Logger: discard(), Tracer: tp.Tracer("test")},
		src, testEncode, newSink(log), newStore(log))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans().Snapshots()
	var batches []sdktrace.ReadOnlySpan
	children := map[string][]string{} // batch span ID -> child names
	for _, s := range spans {
		if s.Name() == "tide.batch" {
			batches = append(batches, s)
		}
	}
	records := 0
	for _, b := range batches {
		records += int(attr(b, "tide.records").AsInt64())
		if attr(b, "tide.pipeline").AsString() != "traced" || attr(b, "tide.namespaces").AsInt64() != 1 ||
			attr(b, "tide.bytes").AsInt64() <= 0 || attr(b, "tide.position").AsString() == "" {
			t.Errorf("batch span attributes %v", b.Attributes())
		}
		for _, s := range spans {
			if s.Parent().SpanID() != b.SpanContext().SpanID() {
				continue
			}
			children[b.SpanContext().SpanID().String()] = append(children[b.SpanContext().SpanID().String()], s.Name())
			if s.StartTime().Before(b.StartTime()) || s.EndTime().After(b.EndTime()) {
				t.Errorf("%s [%v, %v] is not within its batch [%v, %v]", s.Name(), s.StartTime(), s.EndTime(), b.StartTime(), b.EndTime())
			}
		}
	}
	if len(batches) < 3 || records != 250 {
		t.Fatalf("%d batch spans with %d records, want at least 3 with all 250", len(batches), records)
	}
	want := []string{"read", "encode", "put", "commit", "checkpoint save", "ack"}
	for id, names := range children {
		slices.Sort(names)
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(names, w) {
			t.Errorf("batch %s has children %v, want %v", id, names, want)
		}
	}
	if len(spans) != len(batches)*(1+len(want)) {
		t.Errorf("%d spans for %d batches", len(spans), len(batches))
	}
}

// A batch that fails is traced with its error.
func TestTraceFailedBatch(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	log := &callLog{}
	src := newSource(log, events(0, 10))
	src.end = true
	sink := newSink(log)
	sink.putErr = errors.New("disk full")
	p := New(Config{Name: "traced", Logger: discard(), Tracer: tp.Tracer("test")}, src, testEncode, sink, newStore(log))
	if err := p.Run(t.Context()); err == nil {
		t.Fatal("Run succeeded with a failing sink")
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 1 || spans[0].Status().Code != codes.Error || attr(spans[0], "tide.failed_stage").AsString() != "put" {
		t.Fatalf("spans %v, want one failed batch at put", spans)
	}
}
