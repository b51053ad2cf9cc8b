package config

import (
	"fmt"
	"time"
)

// Retry is how the source and the sink retry transient errors (retry: in
// a file); see cdc.RetryPolicy.
type Retry struct {
	// Initial is the wait after the first failure; it doubles after each
	// further one, jittered. Default 100ms.
	Initial time.Duration `yaml:"initial"`
	// Max caps the wait between attempts. Default 30s.
	Max time.Duration `yaml:"max"`
	// MaxElapsed gives up, and fails the pipeline, once an end has been
	// failing this long; 0 (the default) retries transient errors
	// forever. A sink's own max_outage overrides it.
	MaxElapsed time.Duration `yaml:"max_elapsed"`
}

// Telemetry configures OpenTelemetry tracing (telemetry: in a file).
// Tracing is off unless an endpoint is set here or in the standard
// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// environment variables.
type Telemetry struct {
	// OTLPEndpoint is where spans go: http://host:4318 (OTLP over HTTP)
	// or grpc://host:4317 (OTLP over gRPC).
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of batches traced, from 0 to 1. Default 1
	// when an endpoint is set (or OTEL_TRACES_SAMPLER_ARG).
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// Defaults of retry:.
const (
	DefaultRetryInitial = 100 * time.Millisecond
	DefaultRetryMax     = 30 * time.Second
)

// opsErrors checks retry: and telemetry:.
func (p *Pipeline) opsErrors() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	r := p.Retry
	if r.Initial <= 0 {
		bad("retry.initial", "must be positive, got %s", r.Initial)
	}
	if r.Max < r.Initial {
		bad("retry.max", "%s is shorter than retry.initial %s", r.Max, r.Initial)
	}
	if r.MaxElapsed < 0 {
		bad("retry.max_elapsed", "must not be negative (0 retries forever), got %s", r.MaxElapsed)
	}
	if s := p.Telemetry.SampleRatio; s != nil && (*s < 0 || *s > 1) {
		bad("telemetry.sample_ratio", "%g is not between 0 and 1", *s)
	}
	return errs
}

// Defaults returns a pipeline file's top level with its defaults, for the
// configuration reference.
func Defaults() *Pipeline {
	p := &Pipeline{}
	p.setDefaults()
	return p
}
