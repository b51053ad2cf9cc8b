package tide

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/sink/kafka"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	natssink "github.com/tide-cdc/tide/sink/nats"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/sink/stdout"
	"github.com/tide-cdc/tide/source/generate"
	mongosource "github.com/tide-cdc/tide/source/mongo"
	natssource "github.com/tide-cdc/tide/source/nats"
)

// The built-in connectors register as a program's own would. Package tide
// is where they meet the embedded server: a connector never starts one,
// so uri: embedded is resolved here.
func init() {
	RegisterSource("generate", defaultConfig(generate.DefaultConfig), func(_ context.Context, c *generate.Config, env *Env) (cdc.Source, error) {
		cfg := *c
		cfg.Logger = env.Logger
		return generate.New(cfg), nil
	})
	RegisterSource("mongo", defaultConfig(mongosource.DefaultConfig), func(ctx context.Context, c *mongosource.Config, env *Env) (cdc.Source, error) {
		cfg := *c
		if cfg.URI == "embedded" {
			srv, err := startEmbedded(filepath.Join(env.DataDir, "embedded"), cfg.Embedded, env.Logger)
			if err != nil {
				return nil, err
			}
			env.OnClose(srv.Close)
			env.embedded = srv
			cfg.URI, cfg.Embedded = embeddedURI(srv, cfg.Embedded), nil
		}
		cfg.Progress, cfg.Logger = env.Progress, env.Logger
		return mongosource.New(cfg), nil
	})
	RegisterSource("nats", defaultConfig(natssource.DefaultConfig), func(_ context.Context, c *natssource.Config, env *Env) (cdc.Source, error) {
		cfg := *c
		cfg.Name, cfg.Logger = env.Pipeline, env.Logger
		return natssource.New(cfg), nil
	})

	RegisterSink("file", defaultConfig(file.DefaultConfig), func(_ context.Context, c *file.Config, env *Env) (cdc.Sink, error) {
		cfg := *c
		cfg.Pipeline, cfg.DataDir, cfg.Logger = env.Pipeline, env.DataDir, env.Logger
		return file.New(cfg), nil
	})
	RegisterSink("stdout", defaultConfig(stdout.DefaultConfig), func(_ context.Context, c *stdout.Config, _ *Env) (cdc.Sink, error) {
		return stdout.New(*c), nil
	})
	RegisterSink("nats", defaultConfig(natssink.DefaultConfig), func(_ context.Context, c *natssink.Config, env *Env) (cdc.Sink, error) {
		cfg := *c
		cfg.Pipeline, cfg.Logger = env.Pipeline, env.Logger
		return natssink.New(cfg), nil
	})
	RegisterSink("postgres", defaultConfig(postgres.DefaultConfig), func(_ context.Context, c *postgres.Config, env *Env) (cdc.Sink, error) {
		cfg := *c
		cfg.Pipeline, cfg.Logger = env.Pipeline, env.Logger
		return postgres.New(cfg), nil
	})
	RegisterSink("mongo", defaultConfig(mongosink.DefaultConfig), func(ctx context.Context, c *mongosink.Config, env *Env) (cdc.Sink, error) {
		cfg := *c
		if err := prepareMongoSink(ctx, &cfg, env); err != nil {
			return nil, err
		}
		cfg.Pipeline, cfg.Logger = env.Pipeline, env.Logger
		return mongosink.New(cfg), nil
	})
	setPrepare(registry.sinks, "mongo", prepareMongoSink)
	RegisterSink("kafka", defaultConfig(kafka.DefaultConfig), func(_ context.Context, c *kafka.Config, env *Env) (cdc.Sink, error) {
		cfg := *c
		cfg.Pipeline, cfg.Logger = env.Pipeline, env.Logger
		return kafka.New(cfg), nil
	})
}

// defaultConfig turns a connector's DefaultConfig into a Config factory.
func defaultConfig[T any](defaults func() T) func() *T {
	return func() *T { c := defaults(); return &c }
}

// prepareMongoSink starts the second embedded server, the target of
// sink.mongo with uri: embedded (its data under data_dir/embedded-sink),
// and points cfg at it.
func prepareMongoSink(_ context.Context, cfg *mongosink.Config, env *Env) error {
	if cfg.URI != "embedded" {
		return nil
	}
	srv, err := startEmbedded(filepath.Join(env.DataDir, "embedded-sink"), nil, env.Logger.With("server", "embedded-sink"))
	if err != nil {
		return fmt.Errorf("sink.mongo: %w", err)
	}
	env.OnClose(srv.Close)
	env.embeddedSink = srv
	cfg.URI = srv.URI()
	return nil
}

// startEmbedded starts the embedded MongoDB-compatible server on a free
// loopback port, keeping its data in dataDir; with e.Auth it requires
// authentication, and creates e.User on a data directory without users.
// The caller closes it.
func startEmbedded(dataDir string, e *mongosource.Embedded, log *slog.Logger) (*mongowire.Server, error) {
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
func embeddedURI(srv *mongowire.Server, e *mongosource.Embedded) string {
	uri := srv.URI()
	if e == nil || !e.Auth {
		return uri
	}
	creds := url.UserPassword(e.User, e.Password).String()
	return strings.Replace(uri, "mongodb://", "mongodb://"+creds+"@", 1) + "&authSource=admin&authMechanism=SCRAM-SHA-256"
}
