package tide

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/mongowire"
)

// Config is a connector's configuration: a pointer to a struct whose yaml
// tags are the keys of its section of a pipeline file (source.KEY or
// sink.KEY), whose doc comments document them, and whose Validate
// reports every problem, each error beginning with the key it is about
// ("stream: required"); Parse puts the section's path and the key's line
// in front. A field tagged secret:"whole" holds a password or token, one
// tagged secret:"uri" a connection string: both are kept out of logs and
// errors, and a secret written in the file itself draws a warning.
//
// A Config may also have these methods, found by type assertion, for the
// rules that span sections:
//
//   - Describe() cdc.SourceInfo, on a source's: what its records are.
//   - FitSource(cdc.SourceInfo) error, on a sink's: defaults and checks
//     that depend on the source (errors begin with their full path).
//   - BatchDefaults() (int, cdc.ByteSize), on a sink's: batch sizes where
//     the file sets none.
//   - CheckFormat(format string, explicit bool) error, on a sink's: the
//     encodings it takes.
//   - the methods of cdc.CheckpointTable, on a sink's whose sink keeps
//     the checkpoint (checkpoint: sink): the tide checkpoint commands use
//     them, and the built sink must be a cdc.CheckpointKeeper.
//   - CheckpointLocation() string, on such a sink's: where that
//     checkpoint is, for people, if not a tide_checkpoints table.
//   - FenceCheckpoint(ctx, pipeline) error, on such a sink's: take the
//     pipeline over so that a former owner fails its next commit, which
//     makes Spec.BuildFenced work with it.
//   - WritesAvro() bool, on a sink's: it writes encode.format: avro
//     itself (sink.kafka with a schema registry).
type Config interface {
	Validate() error
}

// Env is what a connector's constructor gets besides its Config.
type Env struct {
	// Pipeline is the pipeline's name; DataDir its data directory.
	Pipeline string
	DataDir  string
	// Logger carries the pipeline's name and hides its secrets.
	Logger *slog.Logger
	// Progress, if set, is a terminal for a source's progress bars.
	Progress io.Writer

	closers []func() error
	// embedded and embeddedSink are the servers started for uri:
	// embedded, if any.
	embedded, embeddedSink *mongowire.Server
}

// OnClose registers f to run when the pipeline is closed, after its source
// and sink: what a constructor started for the connector (a server, a
// connection it shares). The last registered runs first.
func (e *Env) OnClose(f func() error) { e.closers = append(e.closers, f) }

// close runs what OnClose registered, last first, once.
func (e *Env) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// connector is one registration.
type connector struct {
	key       string
	newConfig func() Config
	source    func(ctx context.Context, cfg Config, env *Env) (cdc.Source, error)
	sink      func(ctx context.Context, cfg Config, env *Env) (cdc.Sink, error)
	// prepare, for built-in connectors, readies a Config for use outside
	// a pipeline too (the checkpoint commands): it starts the embedded
	// server of uri: embedded.
	prepare func(ctx context.Context, cfg Config, env *Env) error
}

var registry = struct {
	mu      sync.RWMutex // guards the fields below
	sources map[string]*connector
	sinks   map[string]*connector
}{sources: map[string]*connector{}, sinks: map[string]*connector{}}

// RegisterSource makes a source available to pipeline files as
// source.KEY: defaults returns a new Config holding the defaults, which
// Parse decodes the section into, and open builds the source from it. It
// panics if key is taken or C is not a pointer to a struct, as
// database/sql.Register does; call it from an init function.
func RegisterSource[C Config](key string, defaults func() C, open func(ctx context.Context, cfg C, env *Env) (cdc.Source, error)) {
	register(registry.sources, "source", &connector{
		key:       key,
		newConfig: func() Config { return defaults() },
		source:    func(ctx context.Context, cfg Config, env *Env) (cdc.Source, error) { return open(ctx, cfg.(C), env) },
	}, reflect.TypeFor[C]())
}

// RegisterSink makes a sink available to pipeline files as sink.KEY, as
// RegisterSource does for sources.
func RegisterSink[C Config](key string, defaults func() C, open func(ctx context.Context, cfg C, env *Env) (cdc.Sink, error)) {
	register(registry.sinks, "sink", &connector{
		key:       key,
		newConfig: func() Config { return defaults() },
		sink:      func(ctx context.Context, cfg Config, env *Env) (cdc.Sink, error) { return open(ctx, cfg.(C), env) },
	}, reflect.TypeFor[C]())
}

func register(m map[string]*connector, what string, c *connector, t reflect.Type) {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("tide: Register%s(%q): the Config is a %s, not a pointer to a struct", what, c.key, t))
	}
	if c.key == "" {
		panic(fmt.Sprintf("tide: Register%s: empty key", what))
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := m[c.key]; dup {
		panic(fmt.Sprintf("tide: Register%s called twice for %q", what, c.key))
	}
	m[c.key] = c
}

// setPrepare sets a built-in connector's prepare.
func setPrepare[C Config](m map[string]*connector, key string, f func(ctx context.Context, cfg C, env *Env) error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m[key].prepare = func(ctx context.Context, cfg Config, env *Env) error { return f(ctx, cfg.(C), env) }
}

// Sources returns the keys of the registered sources, sorted.
func Sources() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return slices.Sorted(maps.Keys(registry.sources))
}

// Sinks returns the keys of the registered sinks, sorted.
func Sinks() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return slices.Sorted(maps.Keys(registry.sinks))
}

// connectors is the registry as package config takes it.
func connectors() config.Connectors {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	c := config.Connectors{Sources: map[string]func() any{}, Sinks: map[string]func() any{}}
	for k, r := range registry.sources {
		c.Sources[k] = func() any { return r.newConfig() }
	}
	for k, r := range registry.sinks {
		c.Sinks[k] = func() any { return r.newConfig() }
	}
	return c
}

func lookup(m map[string]*connector, key string) *connector {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return m[key]
}
