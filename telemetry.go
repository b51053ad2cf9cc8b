package tide

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is the pipeline's tracing (telemetry: in a file). Tracing is
// off unless OTLPEndpoint, or the standard OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), names where spans go.
type Telemetry struct {
	// OTLPEndpoint is http://host:4318 or https://… (OTLP over HTTP,
	// /v1/traces unless the URL has a path) or grpc://host:4317 (OTLP
	// over gRPC, without TLS).
	OTLPEndpoint string
	// SampleRatio is the share of batches traced, 0 to 1; nil means
	// OTEL_TRACES_SAMPLER_ARG, or 1.
	SampleRatio *float64
}

// TracerName is the instrumentation name of the pipeline's spans.
const TracerName = "github.com/tide-cdc/tide/pipeline"

// tracer returns the tracer of the pipeline's spans, or nil when tracing
// is off. The OTEL_* variables come from the process's environment, as
// the exporters read the rest of them from there. The provider is shut down, flushing what it holds, when the
// pipeline is closed.
func (s *Spec) tracer(ctx context.Context, env *Env) (trace.Tracer, error) {
	tp, err := NewTracerProvider(ctx, s.Telemetry, os.Getenv, s.Name)
	if err != nil || tp == nil {
		return nil, err
	}
	env.OnClose(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	})
	return tp.Tracer(TracerName), nil
}

// NewTracerProvider returns the OpenTelemetry tracer provider of t and
// the OTEL_* environment (read with getenv), exporting over OTLP; nil,
// nil when tracing is off (no endpoint, or OTEL_SDK_DISABLED=true).
// service names the spans' tide.pipeline resource attribute; tide serve
// passes "". The caller shuts it down.
func NewTracerProvider(ctx context.Context, t Telemetry, getenv func(string) string, service string) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	exp, err := newExporter(ctx, t.OTLPEndpoint, getenv)
	if err != nil || exp == nil {
		return nil, err
	}
	ratio := 1.0
	if t.SampleRatio != nil {
		ratio = *t.SampleRatio
	} else if v := getenv("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", v)
		}
		ratio = r
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "tide"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if service != "" {
		attrs = append(attrs, attribute.String("tide.pipeline", service))
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	), nil
}

// newExporter returns the OTLP exporter of endpoint, or of the OTEL_*
// environment when endpoint is empty; nil when neither names one.
func newExporter(ctx context.Context, endpoint string, getenv func(string) string) (*otlptrace.Exporter, error) {
	if endpoint == "" {
		if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
			return nil, nil
		}
		// The exporters read the rest of the environment themselves.
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if proto == "grpc" {
			return otlptracegrpc.New(ctx)
		}
		return otlptracehttp.New(ctx)
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("telemetry.otlp_endpoint %q: want http://host:port, https://host:port or grpc://host:port", endpoint)
	}
	switch u.Scheme {
	case "grpc":
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithInsecure())
	case "http", "https":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			opts = append(opts, otlptracehttp.WithURLPath(u.Path))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("telemetry.otlp_endpoint %q: want http://, https:// or grpc://", endpoint)
}
