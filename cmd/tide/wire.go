package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tide-cdc/tide/internal/cdc"
	"github.com/tide-cdc/tide/internal/checkpoint"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/encode"
	"github.com/tide-cdc/tide/internal/runtime"
	"github.com/tide-cdc/tide/internal/sink/file"
	"github.com/tide-cdc/tide/internal/sink/stdout"
	"github.com/tide-cdc/tide/internal/source/generate"
)

// components is a pipeline's parts, built from its configuration.
type components struct {
	runtimeConfig runtime.Config
	source        cdc.Source
	sink          cdc.Sink
	encode        runtime.EncodeFunc
	store         runtime.Checkpointer
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
func build(ctx context.Context, cfg *config.Pipeline, log *slog.Logger, obs runtime.Observer) (*components, error) {
	c := &components{
		runtimeConfig: runtime.Config{
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
	if c.sink, err = buildSink(ctx, cfg, log); err != nil {
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
		return nil, errors.New("source.mongo: not available in this build yet")
	case s.NATS != nil:
		return nil, errors.New("source.nats: not available in this build yet")
	}
	return nil, errors.New("source: none configured")
}

func buildSink(_ context.Context, cfg *config.Pipeline, log *slog.Logger) (cdc.Sink, error) {
	s := cfg.Sink
	switch {
	case s.File != nil:
		return file.New(file.Config{Path: s.File.Path, Logger: log}), nil
	case s.Stdout != nil:
		return stdout.New(stdout.Config{}), nil
	case s.NATS != nil:
		return nil, errors.New("sink.nats: not available in this build yet")
	case s.Postgres != nil:
		return nil, errors.New("sink.postgres: not available in this build yet")
	case s.Mongo != nil:
		return nil, errors.New("sink.mongo: not available in this build yet")
	}
	return nil, errors.New("sink: none configured")
}
