package tide

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/file"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	natssink "github.com/tide-cdc/tide/sink/nats"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/sink/stdout"
	"github.com/tide-cdc/tide/source/generate"
	mongosource "github.com/tide-cdc/tide/source/mongo"
	natssource "github.com/tide-cdc/tide/source/nats"
)

// parts is a pipeline's components, built from its configuration, and
// what must be closed after them (the embedded server, the data
// directory's lock), last first.
type parts struct {
	config   pipeline.Config
	source   cdc.Source
	sink     cdc.Sink
	encode   pipeline.EncodeFunc
	store    pipeline.Checkpointer
	embedded *mongowire.Server // for uri: embedded, else nil
	// embeddedSink is sink.mongo's server for uri: embedded, else nil.
	embeddedSink *mongowire.Server
	closers      []func() error
}

func (p *parts) close() error {
	var errs []error
	for i := len(p.closers) - 1; i >= 0; i-- {
		errs = append(errs, p.closers[i]())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// build turns a validated configuration into parts. The checkpoint store
// is opened first: it takes the data directory's single-owner lock, so a
// second pipeline on the same directory stops before touching anything.
func build(ctx context.Context, cfg *config.Pipeline, opts Options, log *slog.Logger) (_ *parts, err error) {
	obs := opts.Observer
	if opts.Metrics != nil {
		m := metrics.New(opts.Metrics, cfg.Name)
		if obs == nil {
			obs = m
		} else {
			obs = pipeline.Observers{obs, m}
		}
	}
	p := &parts{
		config: pipeline.Config{
			Name:           cfg.Name,
			MaxRecords:     cfg.Batch.MaxRecords,
			MaxBytes:       int(cfg.Batch.MaxBytes),
			CommitInterval: time.Duration(cfg.Batch.CommitInterval),
			Workers:        cfg.Encode.Workers,
			Logger:         log,
			Observer:       obs,
		},
	}
	defer func() {
		if err != nil {
			p.close()
		}
	}()

	// The directory is opened for its lock in every mode, also when the
	// sink keeps the checkpoint (checkpoint: sink, see sinkStore).
	store, err := checkpoint.Open(cfg.DataDir, log)
	if err != nil {
		return nil, err
	}
	p.store = store
	p.closers = append(p.closers, store.Close)

	switch cfg.Encode.Format {
	case "", "json":
		p.encode = encode.Envelope
	case "canonical":
		p.encode = encode.CanonicalEnvelope
	case "debezium":
		p.encode = (&encode.Debezium{Name: cfg.Name}).Encode
	default:
		return nil, fmt.Errorf("encode.format %q: want json, canonical or debezium", cfg.Encode.Format)
	}

	if p.source, err = p.buildSource(cfg, opts, log); err != nil {
		return nil, err
	}
	if opts.Metrics != nil {
		registerSourceMetrics(opts.Metrics, cfg.Name, p.source)
	}
	if p.sink, err = p.buildSink(cfg, log); err != nil {
		return nil, err
	}
	if ms, ok := p.sink.(*mongosink.Sink); ok && opts.Metrics != nil {
		opts.Metrics.MustRegister(ms.Collector(cfg.Name))
	}
	if p.store, err = sinkStore(cfg, p.sink, p.store); err != nil {
		return nil, err
	}
	if cfg.Checkpoint == "nats_kv" {
		if p.store, err = p.natsKVStore(ctx, cfg, opts, log); err != nil {
			return nil, err
		}
	} else if opts.CheckpointOwner != "" {
		return nil, fmt.Errorf("pipeline %q cannot be fenced for owner %q: only a checkpoint in NATS KV can (checkpoint: {nats_kv: ...})", cfg.Name, opts.CheckpointOwner)
	}
	return p, nil
}

// sinkStore is the pipeline's checkpoint store: store, or for checkpoint:
// sink the sink's own, which is the one switch that makes the sink write
// the checkpoint in each batch's transaction.
func sinkStore(cfg *config.Pipeline, sink cdc.Sink, store pipeline.Checkpointer) (pipeline.Checkpointer, error) {
	if cfg.Checkpoint != "sink" {
		return store, nil
	}
	switch s := sink.(type) {
	case *postgres.Sink:
		return s.Checkpoints(), nil
	case *mongosink.Sink:
		return s.Checkpoints(), nil
	}
	return nil, fmt.Errorf("checkpoint: sink: the sink of pipeline %q does not keep checkpoints", cfg.Name)
}

// natsKVStore is the store of checkpoint: {nats_kv: ...}: opts.NATSKV,
// or one on a connection of the pipeline's own.
// With opts.CheckpointOwner it fences the pipeline's key for that owner
// first, so that the pipeline's Load refuses a key fenced by another
// owner since.
func (p *parts) natsKVStore(ctx context.Context, cfg *config.Pipeline, opts Options, log *slog.Logger) (pipeline.Checkpointer, error) {
	store := opts.NATSKV
	if store == nil {
		s, closeConn, err := openNATSKV(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, closeConn)
		store = s
	}
	if opts.CheckpointOwner != "" {
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		if err := store.Fence(ctx, cfg.Name, opts.CheckpointOwner); err != nil {
			return nil, err
		}
	}
	return store, nil
}

func (p *parts) buildSource(cfg *config.Pipeline, opts Options, log *slog.Logger) (cdc.Source, error) {
	s := cfg.Source
	switch {
	case s.Generate != nil:
		c := s.Generate.Config
		c.Logger = log
		return generate.New(c), nil
	case s.Mongo != nil:
		m := s.Mongo
		uri := m.URI
		if uri == "embedded" {
			srv, err := startEmbedded(filepath.Join(cfg.DataDir, "embedded"), m.Embedded, log)
			if err != nil {
				return nil, err
			}
			p.closers = append(p.closers, srv.Close)
			p.embedded = srv
			uri = embeddedURI(srv, m.Embedded)
		}
		return mongosource.New(mongosource.Config{
			URI:                 uri,
			Database:            m.Database,
			Collection:          m.Collection,
			Collections:         m.Collections,
			Exclude:             m.Exclude,
			FullDocument:        m.FullDocument,
			BeforeChange:        m.BeforeChange,
			Pipeline:            string(m.Pipeline),
			Snapshot:            m.Snapshot,
			MaxBufferedBytes:    int64(m.MaxBufferedBytes),
			BatchSize:           int32(m.BatchSize),
			MaxAwait:            time.Duration(m.MaxAwait),
			MaxReconnects:       m.MaxReconnects,
			SnapshotParallelism: m.SnapshotParallelism,
			HeadroomWarn:        headroomWarn(m.HeadroomWarn),
			OplogPoll:           time.Duration(m.OplogPoll),
			Progress:            opts.Progress,
			Logger:              log,
		}), nil
	case s.NATS != nil:
		c := s.NATS.Source(cfg.Name)
		c.Logger = log
		return natssource.New(c), nil
	}
	return nil, errors.New("source: none configured")
}

// headroomWarn maps source.mongo.headroom_warn to the source's setting:
// 0 in the file turns the warning off, which the source spells negative.
func headroomWarn(d config.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return time.Duration(d)
}

// startEmbedded starts the embedded MongoDB-compatible server on a free
// loopback port, keeping its data in dataDir; with e.Auth it requires
// authentication, and creates e.User on a data directory without users.
// The caller closes it.
func startEmbedded(dataDir string, e *config.MongoEmbedded, log *slog.Logger) (*mongowire.Server, error) {
	c := mongowire.Config{Addr: "127.0.0.1:0", DataDir: dataDir, Logger: log}
	if e != nil && e.Auth {
		c.Auth, c.AdminUser, c.AdminPassword = true, e.User, e.Password
	}
	srv := mongowire.New(c)
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start embedded server: %w", err)
	}
	return srv, nil
}

// embeddedURI is the source's connection string for srv: with e.Auth,
// the credentials of e (SCRAM-SHA-256 against admin).
func embeddedURI(srv *mongowire.Server, e *config.MongoEmbedded) string {
	uri := srv.URI()
	if e == nil || !e.Auth {
		return uri
	}
	creds := url.UserPassword(e.User, e.Password).String()
	return strings.Replace(uri, "mongodb://", "mongodb://"+creds+"@", 1) + "&authSource=admin&authMechanism=SCRAM-SHA-256"
}

func (p *parts) buildSink(cfg *config.Pipeline, log *slog.Logger) (cdc.Sink, error) {
	s := cfg.Sink
	switch {
	case s.File != nil:
		c := s.File.Config
		c.Pipeline, c.DataDir, c.Logger = cfg.Name, cfg.DataDir, log
		return file.New(c), nil
	case s.Stdout != nil:
		return stdout.New(s.Stdout.Config), nil
	case s.NATS != nil:
		c := s.NATS.Sink(cfg.Name)
		c.Logger = log
		return natssink.New(c), nil
	case s.Postgres != nil:
		c := s.Postgres.Config
		c.Table, c.Pipeline, c.Logger = cfg.PostgresTable(), cfg.Name, log
		return postgres.New(c), nil
	case s.Mongo != nil:
		c := s.Mongo.Config
		c.Pipeline, c.Logger = cfg.Name, log
		if c.URI == "embedded" {
			// A second embedded server, the target: its own data
			// directory, closed after the pipeline like the source's.
			srv, err := startEmbedded(filepath.Join(cfg.DataDir, "embedded-sink"), nil, log.With("server", "embedded-sink"))
			if err != nil {
				return nil, fmt.Errorf("sink.mongo: %w", err)
			}
			p.closers = append(p.closers, srv.Close)
			p.embeddedSink = srv
			c.URI = srv.URI()
		}
		return mongosink.New(c), nil
	}
	return nil, errors.New("sink: none configured")
}

// registerSourceMetrics exports the counters of sources that keep their own.
func registerSourceMetrics(reg prometheus.Registerer, pipeline string, src cdc.Source) {
	switch s := src.(type) {
	case *mongosource.Source:
		reg.MustRegister(s.Collector(pipeline))
	case *natssource.Source:
		reg.MustRegister(s.Collector(pipeline))
	}
}
