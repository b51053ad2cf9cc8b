package tide

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/checkpoint/natskv"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/natsconn"
)

// openTimeout bounds connecting to NATS and opening the bucket when a
// pipeline is built; the pipeline's own operations retry by themselves.
const openTimeout = 30 * time.Second

// openNATSKV connects to the bucket of checkpoint: {nats_kv: ...} and
// returns its store and what closes the connection.
func openNATSKV(ctx context.Context, cfg *config.Pipeline, log *slog.Logger) (*natskv.Store, func() error, error) {
	c := cfg.CheckpointStore.NATSKV
	if c == nil {
		return nil, nil, errors.New("checkpoint: nats_kv: no settings")
	}
	nc, err := natsconn.Connect(natsconn.Config{
		Name: cfg.Name + " checkpoints", Servers: c.Servers, Auth: c.Auth, TLS: c.TLS, Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint.nats_kv: %w", err)
	}
	closeConn := func() error { nc.Close(); return nil }
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("checkpoint.nats_kv: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	store, err := natskv.Open(ctx, js, natskv.Config{Bucket: c.Bucket, Replicas: c.Replicas})
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("checkpoint.nats_kv (servers %s): %w", natsconn.RedactServers(c.Servers), err)
	}
	return store, closeConn, nil
}

// withNATSKV runs f with the NATS KV store of cfg, for the checkpoint
// commands.
func withNATSKV(ctx context.Context, cfg *config.Pipeline, f func(*natskv.Store) error) error {
	store, closeConn, err := openNATSKV(ctx, cfg, nil)
	if err != nil {
		return secretsOf(cfg).Error(err)
	}
	defer closeConn()
	return secretsOf(cfg).Error(f(store))
}

// ResetCheckpoint deletes the checkpoint of the pipeline yamlText
// describes, from a data directory (taking its lock, so it fails while
// the pipeline runs there) or from NATS KV (where the running pipeline's
// next save then fails: it is no longer the owner). A pipeline with
// checkpoint: sink is refused: its checkpoint is a row of the sink's
// transactions.
func ResetCheckpoint(ctx context.Context, yamlText []byte, opts Options) error {
	cfg, err := parse(yamlText, opts)
	if err != nil {
		return err
	}
	switch cfg.Checkpoint {
	case "sink":
		return fmt.Errorf("pipeline %q keeps its checkpoint in the sink's own table, in the same transaction as its rows; "+
			"to start over, delete the row yourself (DELETE FROM tide_checkpoints WHERE pipeline = '%s') together with the rows it covers", cfg.Name, cfg.Name)
	case "nats_kv":
		return withNATSKV(ctx, cfg, func(s *natskv.Store) error { return s.Reset(ctx, cfg.Name) })
	}
	store, err := checkpoint.Open(cfg.DataDir, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	return store.Reset(ctx, cfg.Name)
}

// RawCheckpoint returns the pipeline's checkpoint record as stored,
// unverified, so that a damaged one can be shown; nil if it has none.
func RawCheckpoint(ctx context.Context, yamlText []byte, opts Options) ([]byte, error) {
	cfg, err := parse(yamlText, opts)
	if err != nil {
		return nil, err
	}
	switch cfg.Checkpoint {
	case "sink":
		return nil, fmt.Errorf("pipeline %q keeps its checkpoint in the sink's own table", cfg.Name)
	case "nats_kv":
		var raw []byte
		err := withNATSKV(ctx, cfg, func(s *natskv.Store) error {
			var err error
			raw, _, err = s.Raw(ctx, cfg.Name)
			return err
		})
		return raw, err
	}
	raw, err := checkpoint.ReadRaw(cfg.DataDir, cfg.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return raw, err
}
