// Package tide turns the YAML text of a pipeline file into a running
// pipeline: exactly what `tide run FILE` does with the same text.
//
//	spec, err := tide.Parse(yamlText, tide.Options{})
//	if err != nil {
//		return err // names the key and line of every problem
//	}
//	p, err := spec.Build(ctx)
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//	return p.Run(ctx) // or drive it: p.Pause, p.Resume, p.Drain
//
// Sources and sinks are registered under the key that names them in a
// pipeline file (RegisterSource, RegisterSink); the built-in ones
// register the same way, and a program's own connector is validated,
// built and checkpointed like them. Everything else about a pipeline is a
// question to its Spec: where its checkpoint lives (Spec.Checkpoints),
// what it builds (Spec.Build, Spec.BuildFenced).
//
// To build pipelines in code instead, use package pipeline with the
// connectors under source/ and sink/.
package tide

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/deadletter"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/metrics"
	"github.com/tide-cdc/tide/internal/redact"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/transform"
)

// Options adjusts what Parse reads and what the Spec builds. The zero
// value is what `tide run` uses without flags.
type Options struct {
	// File names the pipeline file in errors.
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
	// and those its source and sink keep themselves (a Collector method).
	Metrics prometheus.Registerer
	// Progress, if set, receives a source's snapshot progress bars,
	// redrawn in place: pass a terminal.
	Progress io.Writer
	// NATSKV, if set, is the store of a pipeline with checkpoint:
	// {nats_kv: ...}, instead of one on a connection of its own: a worker
	// running many pipelines shares one.
	NATSKV *natskv.Store
	// Transforms run after the file's transforms: the same steps in
	// code, and a program's own Go functions (transform.Step.Func).
	Transforms []transform.Step
}

// Spec is a parsed and validated pipeline file: each section's Config,
// with its defaults. Parse makes it; it builds the pipeline and answers
// the questions about it that need no running pipeline.
type Spec struct {
	// Name is the pipeline's name.
	Name string
	// DataDir is the data directory: the checkpoint store's, and the
	// lock that keeps a second process off the pipeline.
	DataDir string
	// Source and Sink are the connectors: their key and Config.
	Source, Sink Section
	// Batch bounds each batch the runtime commits.
	Batch Batch
	// Encode is the encode stage's settings.
	Encode Encode
	// Checkpoint is where the checkpoint lives: "file" (the data
	// directory), "sink" (the sink's own transactions) or "nats_kv".
	Checkpoint string
	// OnError is what becomes of a change that fails: "fail", "skip" or
	// "dead_letter".
	OnError string
	// Retry is how the source and the sink retry transient errors
	// (retry: in a file).
	Retry cdc.RetryPolicy
	// Telemetry is the pipeline's tracing (telemetry: in a file); off
	// unless an endpoint is set there or in OTEL_EXPORTER_OTLP_ENDPOINT.
	Telemetry Telemetry

	cfg     *config.Pipeline
	opts    Options
	secrets *redact.Set
}

// Section is a source or sink of a pipeline file: the key it is
// registered under and its Config, as decoded.
type Section struct {
	Key    string
	Config Config
}

// Batch bounds each batch the runtime commits (batch: in a file).
type Batch struct {
	MaxRecords     int
	MaxBytes       cdc.ByteSize
	CommitInterval time.Duration
}

// Encode configures the encode stage (encode: in a file).
type Encode struct {
	Workers int    // 0 means GOMAXPROCS
	Format  string // json | canonical | debezium
}

// Parse reads a pipeline file's text: every problem is reported, each
// with its key and line, joined in one error. ${VAR} references are
// expanded with opts.Getenv; the values of secret keys are kept out of
// every error and log of what the Spec builds.
func Parse(yamlText []byte, opts Options) (*Spec, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	cfg, err := config.ParseNamed(opts.File, yamlText, getenv, connectors())
	if err != nil {
		// A value echoed in a message may be a connection string.
		return nil, (*redact.Set)(nil).Error(err)
	}
	s := &Spec{
		Name:       cfg.Name,
		DataDir:    cfg.DataDir,
		Source:     Section{cfg.Source.Key, cfg.Source.Config.(Config)},
		Sink:       Section{cfg.Sink.Key, cfg.Sink.Config.(Config)},
		Batch:      Batch{cfg.Batch.MaxRecords, cfg.Batch.MaxBytes, cfg.Batch.CommitInterval},
		Encode:     Encode{cfg.Encode.Workers, cfg.Encode.Format},
		Checkpoint: cfg.Checkpoint,
		OnError:    cfg.OnErrorOrDefault(),
		Retry:      cdc.RetryPolicy{Initial: cfg.Retry.Initial, Max: cfg.Retry.Max, MaxElapsed: cfg.Retry.MaxElapsed},
		Telemetry:  Telemetry{OTLPEndpoint: cfg.Telemetry.OTLPEndpoint, SampleRatio: cfg.Telemetry.SampleRatio},
		cfg:        cfg,
		opts:       opts,
		secrets:    &redact.Set{},
	}
	if s.Checkpoint == "" {
		s.Checkpoint = "file"
	}
	s.secrets.Add(cfg.Secrets()...)
	return s, nil
}

// ReadFile reads a pipeline file's text: a regular file of at most 4 MiB
// (a FIFO or /dev/zero is refused before it is read).
func ReadFile(path string) ([]byte, error) { return config.ReadFile(path) }

// ParseFile reads and parses a pipeline file: a regular file of at most
// 4 MiB. Errors name the file.
func ParseFile(path string, opts Options) (*Spec, error) {
	text, err := config.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if opts.File == "" {
		opts.File = path
	}
	return Parse(text, opts)
}

// Warnings returns advice about the file that does not make it invalid,
// each naming its key and line: secrets written inline rather than taken
// from the environment with ${VAR}. They never hold the secret.
func (s *Spec) Warnings() []string { return s.cfg.Warnings() }

// Secrets returns the secret values of the file (passwords of its URIs
// and DSNs, tokens), to keep out of what a program prints.
func (s *Spec) Secrets() []string { return s.cfg.Secrets() }

// Pipeline is a pipeline built by a Spec, with what a command line shows
// about it besides the pipeline itself. It owns what building it opened:
// the data directory's lock (so that a second pipeline on the same
// data_dir is refused while this one exists), connections, and for uri:
// embedded the embedded servers. Run releases them when it returns, and
// so does Close; both may be called, in any order, any number of times.
type Pipeline struct {
	*pipeline.Pipeline

	// Name is the pipeline's name, from the file.
	Name string
	// Source is the source as built; its optional abilities (cdc.Lagger,
	// cdc.SnapshotReporter, cdc.StatusDetailer) are what a status page
	// shows of it.
	Source cdc.Source
	// Embedded is the embedded MongoDB-compatible server started for a
	// source with uri: embedded, or nil; EmbeddedSink the one started for
	// sink.mongo with uri: embedded. Other clients may use them until the
	// pipeline is closed.
	Embedded, EmbeddedSink *mongowire.Server

	secrets *redact.Set
	release func() error
}

// Run is pipeline.Pipeline's Run, with the secrets of the pipeline's file
// hidden in the error; it closes the pipeline when it returns.
func (p *Pipeline) Run(ctx context.Context) error {
	err := p.Pipeline.Run(ctx)
	return p.secrets.Error(errors.Join(err, p.Close()))
}

// Drain is pipeline.Pipeline's Drain, with the secrets hidden in the error.
func (p *Pipeline) Drain(ctx context.Context) error { return p.secrets.Error(p.Pipeline.Drain(ctx)) }

// Err is pipeline.Pipeline's Err, with the secrets hidden in the error.
func (p *Pipeline) Err() error { return p.secrets.Error(p.Pipeline.Err()) }

// Health is pipeline.Pipeline's Health, with the secrets hidden in the
// retrying end's error.
func (p *Pipeline) Health() pipeline.Health {
	h := p.Pipeline.Health()
	h.Err = p.secrets.Error(h.Err)
	return h
}

// Redact hides the pipeline's secrets in text meant for people.
func (p *Pipeline) Redact(text string) string { return p.secrets.String(text) }

// Close releases what building the pipeline opened. Call it for a
// pipeline that will not be run; after Run it does nothing. Do not call it
// while Run runs: Drain, or cancel Run's context, instead.
func (p *Pipeline) Close() error { return p.release() }

// Build builds the pipeline: the data directory is locked first, then
// the connectors are made (uri: embedded starts the embedded server),
// and the checkpoint store is opened where the file says. ctx bounds the
// building only.
func (s *Spec) Build(ctx context.Context) (*Pipeline, error) { return s.build(ctx, "", nil) }

// BuildFenced is Build for a worker that takes the pipeline over as
// owner: its checkpoint (which must be in NATS KV, or in sink.kafka's
// checkpoint topic) is fenced for owner
// before anything else is opened, so any earlier owner's next save fails,
// and so does this pipeline's Load if another owner fences it in between.
func (s *Spec) BuildFenced(ctx context.Context, owner string) (*Pipeline, error) {
	if owner == "" {
		return nil, errors.New("tide: BuildFenced needs an owner")
	}
	return s.build(ctx, owner, nil)
}

func (s *Spec) build(ctx context.Context, owner string, replay []deadletter.Letter) (_ *Pipeline, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := s.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Every log line of the pipeline, its connectors and the embedded
	// servers goes through the redaction of the file's secrets.
	log = redact.Logger(log, s.secrets).With("pipeline", s.Name)
	env := &Env{Pipeline: s.Name, DataDir: s.DataDir, Logger: log, Progress: s.opts.Progress}
	release := sync.OnceValue(env.close)
	defer func() {
		if err != nil {
			release()
			err = s.secrets.Error(err)
		}
	}()

	// Where the checkpoint lives is decided once (Spec.checkpoints). A
	// worker fences first: a former owner that was paused, not killed,
	// and still holds the data directory cannot commit again while this
	// one waits for the directory.
	cps, err := s.checkpoints(ctx, env)
	if err != nil {
		return nil, err
	}
	if owner != "" {
		f, ok := cps.(Fencer)
		if !ok {
			return nil, fmt.Errorf("pipeline %q cannot be fenced for owner %q: %w", s.Name, owner, ErrCannotFence)
		}
		fctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		if err := f.Fence(fctx, owner); err != nil {
			return nil, err
		}
	}

	// The directory is opened for its lock in every mode, also when the
	// checkpoint lives elsewhere, so a second pipeline on the same
	// directory stops before touching anything.
	dir, err := checkpoint.Open(s.DataDir, log)
	if err != nil {
		return nil, err
	}
	env.OnClose(dir.Close)

	enc, err := s.encoder()
	if err != nil {
		return nil, err
	}
	// The runtime closes the source and the sink when Run returns; what
	// their constructors started (env.OnClose) is released after.
	var src cdc.Source
	if replay != nil {
		src, err = newReplaySource(replay)
	} else {
		src, err = lookup(registry.sources, s.Source.Key).source(ctx, s.Source.Config, env)
	}
	if err != nil {
		return nil, fmt.Errorf("source.%s: %w", s.Source.Key, err)
	}
	sink, err := lookup(registry.sinks, s.Sink.Key).sink(ctx, s.Sink.Config, env)
	if err != nil {
		return nil, fmt.Errorf("sink.%s: %w", s.Sink.Key, err)
	}

	chain, err := s.transforms()
	if err != nil {
		return nil, err
	}
	onError, _ := pipeline.ParseOnError(s.OnError) // checked by Parse
	var letters cdc.DeadLetterStore
	if replay != nil {
		onError = pipeline.OnErrorFail // a letter that fails again stops the replay
	} else if letters, err = s.deadLetters(ctx, sink, env); err != nil {
		return nil, err
	}

	obs := s.opts.Observer
	var m *metrics.Pipeline
	if reg := s.opts.Metrics; reg != nil {
		m = metrics.New(reg, s.Name)
		if obs == nil {
			obs = m
		} else {
			obs = pipeline.Observers{obs, m}
		}
		if chain != nil {
			metrics.RegisterTransforms(reg, s.Name, chain)
		}
		if onError != pipeline.OnErrorFail {
			obs = pipeline.Observers{obs, metrics.NewDeadLetters(reg, s.Name)}
		}
		for _, part := range []any{src, sink} {
			if c, ok := part.(MetricsCollector); ok {
				reg.MustRegister(c.Collector(s.Name))
			}
		}
	}
	store, err := cps.running(dir, sink)
	if err != nil {
		return nil, err
	}
	tracer, err := s.tracer(ctx, env)
	if err != nil {
		return nil, err
	}

	pcfg := pipeline.Config{
		Name:           s.Name,
		MaxRecords:     s.Batch.MaxRecords,
		MaxBytes:       int(s.Batch.MaxBytes),
		CommitInterval: s.Batch.CommitInterval,
		Workers:        s.Encode.Workers,
		Logger:         log,
		Observer:       obs,
		OnError:        onError,
		DeadLetters:    letters,
		Retry:          s.Retry,
		Tracer:         tracer,
	}
	if chain != nil {
		pcfg.Transform = chain
		if replay != nil {
			pcfg.Transform = replayTransform(chain, replay)
		}
	}
	if replay != nil { // one batch: the checkpoint moves only past it, to where it was
		pcfg.MaxRecords, pcfg.MaxBytes, pcfg.CommitInterval = len(replay)+1, 1<<62, 24*time.Hour
	}
	p := pipeline.New(pcfg, src, enc, sink, store)
	if m != nil {
		m.Watch(p)
	}
	return &Pipeline{
		Pipeline:     p,
		Name:         s.Name,
		Source:       src,
		Embedded:     env.embedded,
		EmbeddedSink: env.embeddedSink,
		secrets:      s.secrets,
		release:      release,
	}, nil
}

// ErrCannotFence is BuildFenced's error for a pipeline whose checkpoint
// store cannot be fenced: only a checkpoint in NATS KV can, or one a
// sink keeps where it can take the pipeline over (sink.kafka).
var ErrCannotFence = errors.New("only a checkpoint in NATS KV can (checkpoint: {nats_kv: ...}), or sink.kafka's with checkpoint: sink")

// MetricsCollector is a source or sink that keeps Prometheus metrics of
// its own (tide_mongo_*, tide_nats_*); Build registers them with
// Options.Metrics.
type MetricsCollector interface {
	Collector(pipeline string) prometheus.Collector
}

// encoder is the encode stage's function for encode.format.
func (s *Spec) encoder() (pipeline.EncodeFunc, error) {
	switch s.Encode.Format {
	case "", "json":
		return encode.Envelope, nil
	case "canonical":
		return encode.CanonicalEnvelope, nil
	case "debezium", "avro":
		// For avro the sink turns Debezium's value into Avro records of
		// the schemas it registers.
		return (&encode.Debezium{Name: s.Name}).Encode, nil
	}
	return nil, fmt.Errorf("encode.format %q: want json, canonical, debezium or avro", s.Encode.Format)
}
