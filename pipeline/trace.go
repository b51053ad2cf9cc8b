package pipeline

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: with Config.Tracer set, each batch becomes one span,
// "tide.batch", with a child for each stage it went through: read,
// encode, put, commit, checkpoint save and ack. A batch crosses four
// goroutines, so each stage notes its times as it goes, and the saver
// creates every span at the end, with those timestamps. Without a
// tracer, no time is taken and nothing is allocated.

// batchTrace is when one batch went through each stage.
type batchTrace struct {
	readStart, readEnd     time.Time
	encodeStart, encodeEnd time.Time
	putStart, putEnd       time.Time
	commitEnd              time.Time
	records, bytes         int
	namespaces             int
	position               string
}

// encodeTimes returns the span of the chunks' encoding: from the first
// start to the last end.
func encodeTimes(chunks []*chunk) (start, end time.Time) {
	for _, c := range chunks {
		if c.encStart.IsZero() {
			continue
		}
		if start.IsZero() || c.encStart.Before(start) {
			start = c.encStart
		}
		if c.encEnd.After(end) {
			end = c.encEnd
		}
	}
	return start, end
}

// traceBatches emits the spans of batches saved together: the save began
// at saveStart, the acknowledgement ended at ackEnd; ackStart is zero if
// the source has nothing to acknowledge.
func (p *Pipeline) traceBatches(group []saveJob, saveStart, saveEnd, ackStart, ackEnd time.Time) {
	for _, j := range group {
		tr := j.trace
		if tr == nil {
			continue
		}
		end := ackEnd
		if end.IsZero() {
			end = saveEnd
		}
		ctx, span := p.cfg.Tracer.Start(context.Background(), "tide.batch",
			trace.WithTimestamp(tr.readStart),
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				attribute.String("tide.pipeline", p.cfg.Name),
				attribute.Int("tide.records", tr.records),
				attribute.Int("tide.bytes", tr.bytes),
				attribute.Int("tide.namespaces", tr.namespaces),
				attribute.String("tide.position", tr.position),
			))
		if !span.IsRecording() {
			span.End()
			continue
		}
		child := func(name string, start, end time.Time) {
			if start.IsZero() {
				return
			}
			_, s := p.cfg.Tracer.Start(ctx, name, trace.WithTimestamp(start))
			s.End(trace.WithTimestamp(end))
		}
		child("read", tr.readStart, tr.readEnd)
		child("encode", tr.encodeStart, tr.encodeEnd)
		child("put", tr.putStart, tr.putEnd)
		child("commit", tr.putEnd, tr.commitEnd)
		child("checkpoint save", saveStart, saveEnd)
		child("ack", ackStart, ackEnd)
		span.End(trace.WithTimestamp(end))
	}
}

// traceFailed emits the span of a batch that failed at stage, with the
// error, when tracing.
func (p *Pipeline) traceFailed(tr *batchTrace, stage string, err error) {
	if tr == nil {
		return
	}
	_, span := p.cfg.Tracer.Start(context.Background(), "tide.batch", trace.WithTimestamp(tr.readStart),
		trace.WithAttributes(attribute.String("tide.pipeline", p.cfg.Name), attribute.String("tide.failed_stage", stage)))
	span.RecordError(err)
	span.SetStatus(codes.Error, stage+": "+err.Error())
	span.End()
}
