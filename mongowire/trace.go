package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracedDispatch runs one command inside a span named after it, with the
// attributes of OpenTelemetry's database conventions; a reply with ok: 0
// marks the span as an error, with the reply's errmsg and code.
func (s *Server) tracedDispatch(ctx context.Context, c *conn, cmd bson.Raw) ([]byte, error) {
	name := "unknown"
	if first, err := cmd.IndexErr(0); err == nil {
		name = canonicalCommand(first.Key())
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", "mongodb"),
		attribute.String("db.operation.name", name),
	}
	if db, ok := cmd.Lookup("$db").StringValueOK(); ok {
		attrs = append(attrs, attribute.String("db.namespace", db))
	}
	ctx, span := s.cfg.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	reply, err := s.dispatchCommand(ctx, c, cmd)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return reply, err
	}
	if ok, found := bson.Raw(reply).Lookup("ok").AsFloat64OK(); found && ok == 0 {
		msg, _ := bson.Raw(reply).Lookup("errmsg").StringValueOK()
		if code, found := bson.Raw(reply).Lookup("code").AsInt64OK(); found {
			span.SetAttributes(attribute.Int64("db.response.status_code", code))
		}
		span.SetStatus(codes.Error, msg)
	}
	return reply, nil
}
