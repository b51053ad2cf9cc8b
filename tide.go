// Package tide builds a pipeline from the YAML text of a pipeline file:
// exactly what `tide run -f FILE` builds from the same text.
//
//	p, err := tide.NewPipeline(ctx, yamlText)
//	if err != nil {
//		return err // names the key and line of every problem
//	}
//	return p.Run(ctx) // or drive it: p.Pause, p.Resume, p.Drain
//
// The returned *pipeline.Pipeline owns what building it opened: the data
// directory's lock (so that a second pipeline on the same data_dir is
// refused while this one exists) and, for a MongoDB source with uri:
// embedded, the embedded server. Run releases both when it returns, after
// the source is closed; a pipeline that is never run keeps them until the
// process exits (New's Close releases them earlier).
//
// To build pipelines in code instead, use package pipeline with the
// connectors under source/ and sink/.
package tide

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/sink/postgres"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/redact"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
)

// Options adjusts what New builds. The zero value is NewPipeline's.
type Options struct {
	// File names the pipeline file in errors, as tide run -f does.
	File string
	// Getenv looks up the ${VAR} references of the text; nil means
	// os.LookupEnv.
	Getenv func(string) (string, bool)
	// Logger receives the pipeline's logs, with a "pipeline" attribute;
	// nil discards them.
	Logger *slog.Logger
	// Observer, if set, receives the pipeline's counts.
	Observer pipeline.Observer
	// Metrics, if set, gets the pipeline's Prometheus metrics (tide_*)
	// and those a source keeps itself (tide_mongo_*, tide_nats_*).
	Metrics prometheus.Registerer
	// Progress, if set, receives a MongoDB source's snapshot progress
	// bar (one per collection for a source of many), redrawn in place:
	// pass a terminal.
	Progress io.Writer
	// NATSKV, if set, is the store of a pipeline with checkpoint:
	// {nats_kv: ...}, instead of one on a connection of its own: a worker
	// running many pipelines shares one, and fences each pipeline's key
	// (natskv.Store.Fence) before building it.
	NATSKV *natskv.Store
	// CheckpointOwner, if set, fences the pipeline's checkpoint for this
	// owner while it is built (natskv.Store.Fence), before its sink
	// opens: any earlier owner's next save fails, and so does this
	// pipeline's Load if another owner fences it in between. Only a
	// checkpoint in NATS KV can be fenced; with another store New fails.
	CheckpointOwner string
}

// Pipeline is a pipeline built by New, with what a command line shows
// about it besides the pipeline itself.
type Pipeline struct {
	*pipeline.Pipeline

	// Name is the pipeline's name, from the file.
	Name string
	// Source is the configured source as built, for its own statistics
	// (a *mongo.Source or *nats.Source of this module has Stats).
	Source cdc.Source
	// Embedded is the embedded MongoDB-compatible server started for a
	// MongoDB source with uri: embedded, or nil. It stops when Run
	// returns; until then other clients may use it too.
	Embedded *mongowire.Server
	// EmbeddedSink is the second embedded server, the target of
	// sink.mongo with uri: embedded, or nil. Like Embedded, it stops
	// when Run returns.
	EmbeddedSink *mongowire.Server

	secrets *redact.Set
	release func() error
}

// Run is pipeline.Pipeline's Run, with the secrets of the pipeline's file
// (passwords of its URIs and DSNs, NATS tokens) hidden in the error.
func (p *Pipeline) Run(ctx context.Context) error { return p.secrets.Error(p.Pipeline.Run(ctx)) }

// Drain is pipeline.Pipeline's Drain, with the secrets hidden in the error.
func (p *Pipeline) Drain(ctx context.Context) error { return p.secrets.Error(p.Pipeline.Drain(ctx)) }

// Err is pipeline.Pipeline's Err, with the secrets hidden in the error.
func (p *Pipeline) Err() error { return p.secrets.Error(p.Pipeline.Err()) }

// Redact hides the pipeline's secrets in text meant for people: the
// values its file holds, and anything that looks like a password in a
// connection string. Its logs and errors are redacted already.
func (p *Pipeline) Redact(text string) string { return p.secrets.String(text) }

// NewPipeline builds the pipeline that yamlText describes, exactly as
// `tide run -f` does: the text is validated first (every problem names
// its key and line), then the data directory is locked and, for uri:
// embedded, the embedded server is started. Run releases both when it
// returns. ctx bounds the building only.
func NewPipeline(ctx context.Context, yamlText []byte) (*pipeline.Pipeline, error) {
	p, err := New(ctx, yamlText, Options{})
	if err != nil {
		return nil, err
	}
	return p.Pipeline, nil
}

// New is NewPipeline with options, returning the pipeline together with
// its name and source.
func New(ctx context.Context, yamlText []byte, opts Options) (*Pipeline, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := parse(yamlText, opts)
	if err != nil {
		return nil, err
	}
	secrets := secretsOf(cfg)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every log line of the pipeline, its connectors and the embedded
	// server goes through the redaction of the file's secrets.
	log = redact.Logger(log, secrets).With("pipeline", cfg.Name)
	parts, err := build(ctx, cfg, opts, log)
	if err != nil {
		return nil, secrets.Error(err)
	}
	release := sync.OnceValue(parts.close)
	src := own(parts.source, release)
	return &Pipeline{
		Pipeline:     pipeline.New(parts.config, src, parts.encode, parts.sink, parts.store),
		Name:         cfg.Name,
		Source:       parts.source,
		Embedded:     parts.embedded,
		EmbeddedSink: parts.embeddedSink,
		secrets:      secrets,
		release:      release,
	}, nil
}

// secretsOf returns the redaction of cfg's secrets.
func secretsOf(cfg *config.Pipeline) *redact.Set {
	s := &redact.Set{}
	s.Add(cfg.Secrets()...)
	return s
}

// Close releases the data directory's lock and stops the embedded server
// of a pipeline that will not be run. Run does it by itself; do not call
// Close while Run is running.
func (p *Pipeline) Close() error { return p.release() }

// LoadCheckpoint returns the checkpoint that the pipeline yamlText
// describes would resume from, or nil if it has none. It takes no lock, so
// it works while the pipeline runs; what it returns may be overtaken by the
// next commit. A damaged checkpoint file is a *checkpoint.CorruptError.
// With checkpoint: {nats_kv: ...} it reads the bucket.
func LoadCheckpoint(ctx context.Context, yamlText []byte, opts Options) (*cdc.Checkpoint, error) {
	cfg, err := parse(yamlText, opts)
	if err != nil {
		return nil, err
	}
	if cfg.Checkpoint == "sink" && cfg.Sink.Mongo != nil {
		c := cfg.Sink.Mongo.Config
		if c.URI == "embedded" {
			return nil, fmt.Errorf("pipeline %q keeps its checkpoint in the embedded server of sink.mongo (uri: embedded), which runs only inside tide run", cfg.Name)
		}
		c.Pipeline = cfg.Name
		cp, err := mongosink.ReadCheckpoint(ctx, c)
		return cp, secretsOf(cfg).Error(err)
	}
	if cfg.Checkpoint == "sink" {
		if cfg.Sink.Postgres == nil {
			return nil, fmt.Errorf("checkpoint: sink: the sink of pipeline %q does not keep checkpoints", cfg.Name)
		}
		c := cfg.Sink.Postgres.Config
		c.Table, c.Pipeline = cfg.PostgresTable(), cfg.Name
		cp, err := postgres.ReadCheckpoint(ctx, c)
		return cp, secretsOf(cfg).Error(err)
	}
	if cfg.Checkpoint == "nats_kv" {
		var cp *cdc.Checkpoint
		err := withNATSKV(ctx, cfg, func(s *natskv.Store) error {
			var err error
			cp, err = s.Load(ctx, cfg.Name)
			return err
		})
		return cp, err
	}
	r, err := checkpoint.Read(cfg.DataDir, cfg.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp := r.Checkpoint()
	return &cp, nil
}

func parse(yamlText []byte, opts Options) (*config.Pipeline, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	cfg, err := config.ParseNamed(opts.File, yamlText, getenv)
	// A value echoed in a message may be a connection string.
	return cfg, (*redact.Set)(nil).Error(err)
}
