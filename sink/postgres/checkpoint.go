package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// Checkpoints is the checkpoint store of a sink that keeps the pipeline's
// checkpoint in its own table, written in the same transaction as the
// rows, which makes the sink exactly-once. Get it from Sink.Checkpoints and
// pass it to the pipeline as its pipeline.Checkpointer.
type Checkpoints struct {
	s *Sink

	ledger sinkcheckpoint.Ledger // what Commit wrote, for Save to find
}

// Load returns the pipeline's checkpoint from tide_checkpoints, or nil if
// it has none. It connects, creates the table if missing, and takes the
// pipeline's lock, so that it waits for a killed tide's session to end
// before it reads. Call it before Open, as the pipeline does, never while
// the sink commits.
func (c *Checkpoints) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	s := c.s
	if err := s.check(); err != nil {
		return nil, err
	}
	if pipeline != s.cfg.Pipeline {
		return nil, fmt.Errorf("postgres sink: asked for the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, s.cfg.Pipeline)
	}
	s.sql = newStatements(s.cfg)
	if s.conn == nil {
		if err := s.connectRetrying(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.createCheckpoints(ctx); err != nil {
		return nil, err
	}
	return readCheckpoint(ctx, s.conn, s.sql, pipeline)
}

// readCheckpoint reads the pipeline's row of tide_checkpoints; nil if it
// has none.
func readCheckpoint(ctx context.Context, conn *pgx.Conn, sql statements, pipeline string) (*cdc.Checkpoint, error) {
	var raw []byte
	err := conn.QueryRow(ctx, sql.loadCheckpoint, pipeline).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read checkpoint of %q from %s: %w", pipeline, sql.checkpoints, err)
	}
	cp, err := sinkcheckpoint.Unmarshal(raw)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: checkpoint of %q in %s: %w", pipeline, sql.checkpoints, err)
	}
	return cp, nil
}

// Save writes nothing: Commit already wrote cp in the batch's transaction,
// together with the rows it names, and the pipeline calls Save only after
// that Commit returned. Writing it again here would be a second,
// non-atomic write, from another goroutine than the one that owns the
// connection. Save only checks that cp is a checkpoint this sink
// committed, so that a store passed to a pipeline with another sink, or
// another pipeline's name, fails at once instead of recording progress no
// transaction made.
func (c *Checkpoints) Save(_ context.Context, pipeline string, cp cdc.Checkpoint) error {
	if pipeline != c.s.cfg.Pipeline {
		return fmt.Errorf("postgres sink: asked to save the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, c.s.cfg.Pipeline)
	}
	ok, err := c.ledger.Saved(cp)
	switch {
	case err != nil:
		return fmt.Errorf("postgres sink: %w", err)
	case ok:
		return nil
	}
	return fmt.Errorf("postgres sink: checkpoint at %s was not committed by this sink: pass Sink.Checkpoints only to the pipeline writing to that sink", cp.Source)
}

// ReadCheckpoint returns the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints, or nil if it has none, without taking the pipeline's
// lock, so that it works while the pipeline runs (tide checkpoint show).
// What it returns may be overtaken by the next commit.
func ReadCheckpoint(ctx context.Context, cfg Config) (*cdc.Checkpoint, error) {
	s := New(cfg)
	if err := s.check(); err != nil {
		return nil, err
	}
	sql := newStatements(s.cfg)
	conn, err := pgx.Connect(ctx, s.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cp, err := readCheckpoint(ctx, conn, sql, s.cfg.Pipeline)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil // undefined_table: nothing committed yet
	}
	return cp, err
}

// RewriteCheckpoint replaces the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints with what change returns for it (the tide recovery
// commands: checkpoint set, snapshot). It holds the pipeline's lock while
// it does, so it refuses while the pipeline runs; change sees nil when
// there is no checkpoint, and writes nothing by returning nil.
func RewriteCheckpoint(ctx context.Context, cfg Config, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	return withLocked(ctx, cfg, func(conn *pgx.Conn, sql statements) error {
		cp, err := readCheckpoint(ctx, conn, sql, cfg.Pipeline)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			cp, err = nil, nil // undefined_table: nothing committed yet
		}
		if err != nil {
			return err
		}
		next, err := change(cp)
		if err != nil || next == nil {
			return err
		}
		b, err := sinkcheckpoint.Marshal(*next)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, sql.saveCheckpoint, cfg.Pipeline, b); err != nil {
			return fmt.Errorf("postgres sink: write checkpoint of %q to %s: %w", cfg.Pipeline, sql.checkpoints, err)
		}
		return nil
	})
}

// DeleteCheckpoint deletes the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints (tide checkpoint reset), under the pipeline's lock. The
// rows the sink wrote stay: a mirror converges again as the next run
// replays, an append table gets those events a second time.
func DeleteCheckpoint(ctx context.Context, cfg Config) error {
	return withLocked(ctx, cfg, func(conn *pgx.Conn, sql statements) error {
		_, err := conn.Exec(ctx, `DELETE FROM `+sql.checkpoints+` WHERE pipeline = $1`, cfg.Pipeline)
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42P01" {
			return nil // undefined_table: nothing committed yet
		}
		if err != nil {
			return fmt.Errorf("postgres sink: delete checkpoint of %q from %s: %w", cfg.Pipeline, sql.checkpoints, err)
		}
		return nil
	})
}

// withLocked runs f on a connection that holds the pipeline's lock, which
// a running pipeline's sink holds too.
func withLocked(ctx context.Context, cfg Config, f func(*pgx.Conn, statements) error) error {
	s := New(cfg)
	if err := s.check(); err != nil {
		return err
	}
	sql := newStatements(s.cfg)
	conn, err := pgx.Connect(ctx, s.cfg.DSN)
	if err != nil {
		return fmt.Errorf("postgres sink: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	key := "tide checkpoint " + sql.checkpoints + " " + s.cfg.Pipeline
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&locked); err != nil {
		return fmt.Errorf("postgres sink: lock pipeline %q: %w", s.cfg.Pipeline, err)
	}
	if !locked {
		return fmt.Errorf("postgres sink: pipeline %q is running (another session holds its checkpoint's lock): stop it first", s.cfg.Pipeline)
	}
	return f(conn, sql)
}

// The Config's side of a sink that keeps the checkpoint (cdc.CheckpointTable):
// the functions above, for the pipeline named.
var _ cdc.CheckpointTable = Config{}

// ReadCheckpoint is ReadCheckpoint for pipeline.
func (c Config) ReadCheckpoint(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	c.Pipeline = pipeline
	return ReadCheckpoint(ctx, c)
}

// RewriteCheckpoint is RewriteCheckpoint for pipeline.
func (c Config) RewriteCheckpoint(ctx context.Context, pipeline string, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	c.Pipeline = pipeline
	return RewriteCheckpoint(ctx, c, change)
}

// DeleteCheckpoint is DeleteCheckpoint for pipeline.
func (c Config) DeleteCheckpoint(ctx context.Context, pipeline string) error {
	c.Pipeline = pipeline
	return DeleteCheckpoint(ctx, c)
}
