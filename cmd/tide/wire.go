package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/term"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/sink/stdout"
	"github.com/tide-cdc/tide/source/generate"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// components is a pipeline's parts, built from its configuration.
type components struct {
	runtimeConfig pipeline.Config
	source        cdc.Source
	sink          cdc.Sink
	encode        pipeline.EncodeFunc
	store         pipeline.Checkpointer
	closers       []func() error
}

func (c *components) close() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	return errors.Join(errs...)
}

// build turns a validated configuration into components. The checkpoint
// store is opened first: it takes the data directory's single-owner lock,
// so a second tide on the same directory stops before touching anything.
func build(ctx context.Context, cfg *config.Pipeline, log *slog.Logger, obs *metrics.Pipeline, reg prometheus.Registerer) (*components, error) {
	c := &components{
		runtimeConfig: pipeline.Config{
			Name:           cfg.Name,
			MaxRecords:     cfg.Batch.MaxRecords,
			MaxBytes:       int(cfg.Batch.MaxBytes),
			CommitInterval: time.Duration(cfg.Batch.CommitInterval),
			Workers:        cfg.Encode.Workers,
			Logger:         log,
			Observer:       obs,
		},
	}
	store, err := checkpoint.Open(cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	c.store = store
	c.closers = append(c.closers, store.Close)

	switch cfg.Encode.Format {
	case "", "json":
		c.encode = encode.Envelope
	case "canonical":
		c.encode = encode.CanonicalEnvelope
	default:
		c.close()
		return nil, fmt.Errorf("encode.format %q: want json or canonical", cfg.Encode.Format)
	}

	if c.source, err = buildSource(ctx, cfg, log); err != nil {
		c.close()
		return nil, err
	}
	if reg != nil {
		registerSourceMetrics(reg, cfg.Name, c.source)
	}
	if c.sink, err = buildSink(ctx, cfg, log); err != nil {
		c.close()
		return nil, err
	}
	if c.store, err = sinkStore(cfg, c.sink, c.store); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func buildSource(_ context.Context, cfg *config.Pipeline, log *slog.Logger) (cdc.Source, error) {
	s := cfg.Source
	switch {
	case s.Generate != nil:
		return generate.New(generate.Config{
			Count:        s.Generate.Count,
			Rate:         s.Generate.Rate,
			PayloadBytes: s.Generate.PayloadBytes,
			Logger:       log,
		}), nil
	case s.Mongo != nil:
		m := s.Mongo
		var dataDir string
		if m.URI == "embedded" {
			dataDir = filepath.Join(cfg.DataDir, "embedded")
		}
		return mongosource.New(mongosource.Config{
			URI:              m.URI,
			EmbeddedDataDir:  dataDir,
			Database:         m.Database,
			Collection:       m.Collection,
			FullDocument:     m.FullDocument,
			BeforeChange:     m.BeforeChange,
			Pipeline:         string(m.Pipeline),
			Snapshot:         m.Snapshot,
			MaxBufferedBytes: int64(m.MaxBufferedBytes),
			BatchSize:        int32(m.BatchSize),
			MaxAwait:         time.Duration(m.MaxAwait),
			MaxReconnects:    m.MaxReconnects,
			Progress:         terminal(os.Stderr),
			Logger:           log,
		}), nil
	case s.NATS != nil:
		return newNATSSource(cfg.Name, s.NATS, log), nil
	}
	return nil, errors.New("source: none configured")
}

// sinkStore returns the checkpoint store for checkpoint: sink, the sink's
// own (rows and checkpoint in one transaction), and store otherwise. The
// data directory's store stays open for its lock.
func sinkStore(cfg *config.Pipeline, sink cdc.Sink, store pipeline.Checkpointer) (pipeline.Checkpointer, error) {
	if cfg.Checkpoint != "sink" {
		return store, nil
	}
	ps, ok := sink.(*postgres.Sink)
	if !ok {
		return nil, fmt.Errorf("checkpoint: sink: the sink of pipeline %q does not keep checkpoints", cfg.Name)
	}
	return ps.Checkpoints(), nil
}

func buildSink(_ context.Context, cfg *config.Pipeline, log *slog.Logger) (cdc.Sink, error) {
	s := cfg.Sink
	switch {
	case s.File != nil:
		return file.New(file.Config{Path: s.File.Path, Pipeline: cfg.Name, DataDir: cfg.DataDir, Logger: log}), nil
	case s.Stdout != nil:
		return stdout.New(stdout.Config{}), nil
	case s.NATS != nil:
		return newNATSSink(cfg.Name, s.NATS, log), nil
	case s.Postgres != nil:
		pg := s.Postgres
		return postgres.New(postgres.Config{
			DSN: pg.DSN, Schema: pg.Schema, Table: cfg.PostgresTable(), Mode: pg.Mode,
			CreateTable: pg.CreateTable, SoftDelete: pg.SoftDelete,
			Pipeline: cfg.Name, Logger: log,
		}), nil
	case s.Mongo != nil:
		return nil, errors.New("sink.mongo: the MongoDB sink is not part of this release; use file, stdout, nats or postgres")
	}
	return nil, errors.New("sink: none configured")
}

// registerSourceMetrics exports the counters of sources that keep their own.
func registerSourceMetrics(reg prometheus.Registerer, pipeline string, src cdc.Source) {
	if s, ok := src.(*mongosource.Source); ok {
		reg.MustRegister(s.Collector(pipeline))
	}
}

// terminal returns f if it is a terminal, for progress bars, else nil.
func terminal(f *os.File) io.Writer {
	if term.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}
