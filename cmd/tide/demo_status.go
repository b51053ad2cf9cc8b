package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/internal/status"
	"github.com/tide-cdc/tide/pipeline"
)

// demoStatus is a demo's status page: tide run's, on a free loopback port
// by default, with the pipeline's metrics.
type demoStatus struct {
	name    string
	tracker *status.Tracker
	reg     *prometheus.Registry
	metrics *metrics.Pipeline
}

func newDemoStatus(name string) *demoStatus {
	reg := metrics.NewRegistry()
	return &demoStatus{name: name, tracker: status.NewTracker(), reg: reg, metrics: metrics.New(reg, name)}
}

// observer is the pipeline's Observer: the page's tracker and the metrics.
func (d *demoStatus) observer() pipeline.Observer { return pipeline.Observers{d.tracker, d.metrics} }

// serve starts the page on f.httpAddr, unless it is empty, and prints its
// URL. stop shuts it down and waits for its goroutine.
func (d *demoStatus) serve(f demoFlags, stdout io.Writer, log *slog.Logger, src cdc.Source) (stop func(), err error) {
	if f.httpAddr == "" {
		if f.authFile != "" {
			return nil, fmt.Errorf("--http-auth-file needs --http-addr")
		}
		return func() {}, nil
	}
	if c, ok := src.(interface {
		Collector(string) prometheus.Collector
	}); ok {
		d.reg.MustRegister(c.Collector(d.name))
	}
	srv, err := status.Listen(status.Config{Addr: f.httpAddr, AuthFile: f.authFile, Metrics: d.reg, Logger: log})
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
