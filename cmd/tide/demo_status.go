package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/pipeline"
)

// demoStatus is a demo's status page: tide run's, on a free loopback port
// by default, with the pipeline's metrics.
type demoStatus struct {
	tracker *status.Tracker
	reg     *prometheus.Registry
	signal  *demoSignal
}

func newDemoStatus() *demoStatus {
	return &demoStatus{tracker: status.NewTracker(), reg: metrics.NewRegistry(), signal: newDemoSignal()}
}

// options are what the demo's pipeline is parsed and built with: the
// page's tracker and registry, and the demo's commit signal.
func (d *demoStatus) options(log *slog.Logger) tide.Options {
	return tide.Options{Logger: log, Observer: pipeline.Observers{d.tracker, d.signal}, Metrics: d.reg}
}

// serve starts the page on f.httpAddr, unless it is empty, and prints its
// URL. stop shuts it down and waits for its goroutine.
func (d *demoStatus) serve(f demoFlags, stdout io.Writer, log *slog.Logger) (stop func(), err error) {
	if f.httpAddr == "" {
		return func() {}, nil
	}
	srv, err := status.Listen(status.Config{Addr: f.httpAddr, AuthFile: f.authFile, Insecure: f.insecure, Metrics: d.reg, Logger: log})
	if err != nil {
		return nil, err
	}
	srv.Add(d.tracker)
	fmt.Fprintf(stdout, "status page: %s\n", srv.URL())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			log.Warn("status page stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// buildDemo parses a demo's pipeline text, as a user's file is, and
// builds it: the demo is a pipeline file like any other.
func buildDemo(ctx context.Context, text []byte, opts tide.Options) (*tide.Spec, *tide.Pipeline, error) {
	spec, err := tide.Parse(text, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("the demo's pipeline: %w", err)
	}
	p, err := spec.Build(ctx)
	if err != nil {
		return nil, nil, err
	}
	return spec, p, nil
}
