package tide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/pipeline"
)

// openTimeout bounds connecting to NATS and opening the bucket when a
// pipeline is built; the pipeline's own operations retry by themselves.
const openTimeout = 30 * time.Second

// Checkpoints is where a pipeline's checkpoint lives, as Spec.Checkpoints
// found it: the data directory, a NATS KV bucket, or the sink's own
// table. Load takes no lock, so it works while the pipeline runs (what it
// returns may be overtaken by the next commit); Save, Rewrite and Reset
// take the store's lock, or the pipeline's ownership, so they refuse
// while the pipeline runs, or make a running pipeline stop at its next
// commit (NATS KV). A store that can hand the pipeline to a new owner is
// also a Fencer.
type Checkpoints interface {
	// Load returns the checkpoint, or nil if there is none. A damaged
	// checkpoint file is a *checkpoint.CorruptError.
	Load(ctx context.Context) (*cdc.Checkpoint, error)
	// Save writes cp as the pipeline's checkpoint.
	Save(ctx context.Context, cp cdc.Checkpoint) error
	// Rewrite replaces the checkpoint with what change returns for it,
	// atomically under the store's lock; change sees nil when there is
	// none, and writes nothing by returning nil.
	Rewrite(ctx context.Context, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error
	// Reset deletes the checkpoint: the next run starts fresh.
	Reset(ctx context.Context) error
	// Raw returns the checkpoint as stored, unverified, so that a damaged
	// one can be shown; nil if there is none.
	Raw(ctx context.Context) ([]byte, error)
	// Where says where the checkpoint lives, for people.
	Where() string
	// Close releases the store's connections.
	Close() error
}

// A Fencer is a Checkpoints that can make owner the pipeline's only
// writer: any earlier owner's next save fails.
type Fencer interface {
	Fence(ctx context.Context, owner string) error
}

// Checkpoints opens the store of the pipeline's checkpoint: the one
// place that knows where it lives. For a sink that keeps it (checkpoint:
// sink) it is the sink's own table, reached through the sink's Config
// (cdc.CheckpointTable); for uri: embedded that starts the sink's
// embedded server on the data directory, so the pipeline must be stopped.
func (s *Spec) Checkpoints(ctx context.Context) (Checkpoints, error) {
	return s.checkpoints(ctx, nil)
}

// storeOf is a Checkpoints that also gives the store a running pipeline
// saves to, with the data directory's store locked and the sink built.
type storeOf interface {
	Checkpoints
	running(dir *checkpoint.Dir, sink cdc.Sink) (pipeline.Checkpointer, error)
}

// checkpoints is the one place that decides where the checkpoint lives.
// building is the Env of a pipeline being built, whose sink's
// constructor readies the sink's Config itself; nil for the checkpoint
// commands.
func (s *Spec) checkpoints(ctx context.Context, building *Env) (storeOf, error) {
	switch s.Checkpoint {
	case "sink":
		// A copy: preparing it (uri: embedded) must not change the Spec's.
		cfg := cloneConfig(s.Sink.Config)
		table, ok := cfg.(cdc.CheckpointTable)
		if !ok {
			return nil, fmt.Errorf("checkpoint: sink: sink.%s does not keep checkpoints", s.Sink.Key)
		}
		env := building
		if env == nil {
			env = &Env{Pipeline: s.Name, DataDir: s.DataDir, Logger: slog.New(slog.DiscardHandler)}
			if c := lookup(registry.sinks, s.Sink.Key); c.prepare != nil {
				if err := c.prepare(ctx, cfg, env); err != nil {
					return nil, s.secrets.Error(err)
				}
			}
		}
		t := &tableCheckpoints{spec: s, table: table, env: env}
		if f, ok := table.(checkpointFencer); ok {
			return &fencingTableCheckpoints{tableCheckpoints: t, fencer: f}, nil
		}
		return t, nil
	case "nats_kv":
		env := building
		if env == nil {
			env = &Env{}
		}
		store, err := s.natsKV(ctx, env)
		if err != nil {
			return nil, err
		}
		return &kvCheckpoints{spec: s, store: store, env: env}, nil
	}
	return &dirCheckpoints{spec: s}, nil
}

// cloneConfig returns a shallow copy of c, a pointer to a struct.
func cloneConfig(c Config) Config {
	v := reflect.ValueOf(c)
	cp := reflect.New(v.Type().Elem())
	cp.Elem().Set(v.Elem())
	return cp.Interface().(Config)
}

// dirCheckpoints is the data directory's store.
type dirCheckpoints struct{ spec *Spec }

func (d *dirCheckpoints) running(dir *checkpoint.Dir, _ cdc.Sink) (pipeline.Checkpointer, error) {
	return dir, nil
}

func (d *dirCheckpoints) Where() string { return "data directory " + d.spec.DataDir }
func (d *dirCheckpoints) Close() error  { return nil }

func (d *dirCheckpoints) Load(context.Context) (*cdc.Checkpoint, error) {
	r, err := checkpoint.Read(d.spec.DataDir, d.spec.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp := r.Checkpoint()
	return &cp, nil
}

func (d *dirCheckpoints) Raw(context.Context) ([]byte, error) {
	raw, err := checkpoint.ReadRaw(d.spec.DataDir, d.spec.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return raw, err
}

// locked runs f with the directory's store, under its lock.
func (d *dirCheckpoints) locked(f func(*checkpoint.Dir) error) error {
	store, err := checkpoint.Open(d.spec.DataDir, nil)
	if err != nil {
		var inUse *checkpoint.InUseError
		if errors.As(err, &inUse) {
			return fmt.Errorf("%w: stop the pipeline first", err)
		}
		return err
	}
	defer store.Close()
	return f(store)
}

func (d *dirCheckpoints) Save(ctx context.Context, cp cdc.Checkpoint) error {
	return d.locked(func(s *checkpoint.Dir) error { return s.Save(ctx, d.spec.Name, cp) })
}

func (d *dirCheckpoints) Reset(ctx context.Context) error {
	return d.locked(func(s *checkpoint.Dir) error { return s.Reset(ctx, d.spec.Name) })
}

func (d *dirCheckpoints) Rewrite(ctx context.Context, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	return d.locked(func(s *checkpoint.Dir) error {
		cp, err := s.Load(ctx, d.spec.Name)
		if err != nil {
			return err
		}
		next, err := change(cp)
		if err != nil || next == nil {
			return err
		}
		return s.Save(ctx, d.spec.Name, *next)
	})
}

// kvCheckpoints is a NATS KV bucket's store.
type kvCheckpoints struct {
	spec  *Spec
	store *natskv.Store
	env   *Env
}

func (k *kvCheckpoints) running(*checkpoint.Dir, cdc.Sink) (pipeline.Checkpointer, error) {
	return k.store, nil
}

func (k *kvCheckpoints) Where() string { return fmt.Sprintf("NATS KV bucket %q", k.store.Bucket()) }

func (k *kvCheckpoints) Close() error { return k.env.close() }

func (k *kvCheckpoints) Load(ctx context.Context) (*cdc.Checkpoint, error) {
	cp, err := k.store.Load(ctx, k.spec.Name)
	return cp, k.spec.secrets.Error(err)
}

func (k *kvCheckpoints) Save(ctx context.Context, cp cdc.Checkpoint) error {
	return k.spec.secrets.Error(k.store.Save(ctx, k.spec.Name, cp))
}

func (k *kvCheckpoints) Reset(ctx context.Context) error {
	return k.spec.secrets.Error(k.store.Reset(ctx, k.spec.Name))
}

func (k *kvCheckpoints) Raw(ctx context.Context) ([]byte, error) {
	raw, _, err := k.store.Raw(ctx, k.spec.Name)
	return raw, k.spec.secrets.Error(err)
}

// Rewrite saves by compare-and-set on the revision it loaded: a pipeline
// that saves in between makes it fail, and a pipeline still running fails
// its next save, instead of overwriting the new checkpoint.
func (k *kvCheckpoints) Rewrite(ctx context.Context, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	cp, err := k.Load(ctx)
	if err != nil {
		return err
	}
	next, err := change(cp)
	if err != nil || next == nil {
		return err
	}
	return k.Save(ctx, *next)
}

func (k *kvCheckpoints) Fence(ctx context.Context, owner string) error {
	return k.spec.secrets.Error(k.store.Fence(ctx, k.spec.Name, owner))
}

// tableCheckpoints is the sink's own table (checkpoint: sink).
type tableCheckpoints struct {
	spec  *Spec
	table cdc.CheckpointTable
	env   *Env
}

// running is the sink's own store: the one switch that makes it write the
// checkpoint in each batch's transaction.
func (t *tableCheckpoints) running(_ *checkpoint.Dir, sink cdc.Sink) (pipeline.Checkpointer, error) {
	k, ok := sink.(cdc.CheckpointKeeper)
	if !ok {
		return nil, fmt.Errorf("checkpoint: sink: sink.%s does not keep checkpoints", t.spec.Sink.Key)
	}
	return k.KeepCheckpoints(), nil
}

// Where names the sink's store: its own words, where its Config has a
// CheckpointLocation method, or its tide_checkpoints table.
func (t *tableCheckpoints) Where() string {
	if l, ok := t.table.(interface{ CheckpointLocation() string }); ok {
		return l.CheckpointLocation()
	}
	return fmt.Sprintf("the tide_checkpoints table of sink.%s", t.spec.Sink.Key)
}

func (t *tableCheckpoints) Close() error { return t.env.close() }

func (t *tableCheckpoints) Load(ctx context.Context) (*cdc.Checkpoint, error) {
	cp, err := t.table.ReadCheckpoint(ctx, t.spec.Name)
	return cp, t.spec.secrets.Error(err)
}

func (t *tableCheckpoints) Save(ctx context.Context, cp cdc.Checkpoint) error {
	return t.Rewrite(ctx, func(*cdc.Checkpoint) (*cdc.Checkpoint, error) { return &cp, nil })
}

func (t *tableCheckpoints) Rewrite(ctx context.Context, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	return t.spec.secrets.Error(t.table.RewriteCheckpoint(ctx, t.spec.Name, change))
}

func (t *tableCheckpoints) Reset(ctx context.Context) error {
	return t.spec.secrets.Error(t.table.DeleteCheckpoint(ctx, t.spec.Name))
}

// Raw is the checkpoint as the table keeps it, in JSON.
func (t *tableCheckpoints) Raw(ctx context.Context) ([]byte, error) {
	cp, err := t.Load(ctx)
	if err != nil || cp == nil {
		return nil, err
	}
	return json.Marshal(cp)
}

// checkpointFencer is a sink's Config whose checkpoint store can make a
// new owner the pipeline's only writer (sink.kafka: its transactional
// id, taken over).
type checkpointFencer interface {
	FenceCheckpoint(ctx context.Context, pipeline string) error
}

// fencingTableCheckpoints is a sink's own store that is also a Fencer.
type fencingTableCheckpoints struct {
	*tableCheckpoints
	fencer checkpointFencer
}

// Fence takes the pipeline over in the sink's store: an earlier owner's
// next commit fails. The owner's name is not kept: the store fences by
// taking over, whoever asks.
func (f *fencingTableCheckpoints) Fence(ctx context.Context, _ string) error {
	return f.spec.secrets.Error(f.fencer.FenceCheckpoint(ctx, f.spec.Name))
}

// natsKV is the store of checkpoint: {nats_kv: ...}: Options.NATSKV, or
// one on a connection of its own, closed with env.
func (s *Spec) natsKV(ctx context.Context, env *Env) (*natskv.Store, error) {
	if s.opts.NATSKV != nil {
		return s.opts.NATSKV, nil
	}
	c := s.cfg.CheckpointStore.NATSKV
	if c == nil {
		return nil, errors.New("checkpoint: nats_kv: no settings")
	}
	nc, err := natsconn.Connect(natsconn.Config{
		Name: s.Name + " checkpoints", Servers: c.Servers, Auth: c.Auth, TLS: c.TLS, Logger: env.Logger,
	})
	if err != nil {
		return nil, s.secrets.Error(fmt.Errorf("checkpoint.nats_kv: %w", err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("checkpoint.nats_kv: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	store, err := natskv.Open(ctx, js, natskv.Config{Bucket: c.Bucket, Replicas: c.Replicas})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("checkpoint.nats_kv (servers %s): %w", natsconn.RedactServers(c.Servers), err)
	}
	env.OnClose(func() error { nc.Close(); return nil })
	return store, nil
}
