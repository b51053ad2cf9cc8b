package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tide-cdc/tide/cdc"
)

// Checkpoints is the checkpoint store of a sink that keeps the pipeline's
// checkpoint in its own table, written in the same transaction as the
// rows, which makes the sink exactly-once. Get it from Sink.Checkpoints and
// pass it to the pipeline as its pipeline.Checkpointer.
type Checkpoints struct {
	s *Sink

	mu      sync.Mutex // guards the field below
	pending [][]byte   // checkpoints committed and not yet saved, oldest first
}

// maxPending bounds the committed checkpoints kept for Save to find. The
// pipeline's saves trail its commits by at most five batches (it saves
// only the newest of the batches waiting together).
const maxPending = 8

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
		if err := s.connect(ctx); err != nil {
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
	cp, err := unmarshalCheckpoint(raw)
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
	b, err := marshalCheckpoint(cp)
	if err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pending {
		if bytes.Equal(p, b) {
			c.pending = c.pending[i+1:]
			return nil
		}
	}
	return fmt.Errorf("postgres sink: checkpoint at %s was not committed by this sink: pass Sink.Checkpoints only to the pipeline writing to that sink", cp.Source)
}

// committed records that Commit wrote b, for Save to find.
func (c *Checkpoints) committed(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == maxPending {
		c.pending = c.pending[1:]
	}
	c.pending = append(c.pending, b)
}

// storedCheckpoint is the JSON of a tide_checkpoints row. A position is
// JSON text by contract; one that is not is kept as a string in
// source_text, so that nothing is lost.
type storedCheckpoint struct {
	Source     json.RawMessage   `json:"source"`
	SourceText *string           `json:"source_text,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Sink       json.RawMessage   `json:"sink,omitempty"`
	SinkText   *string           `json:"sink_text,omitempty"`
}

func marshalCheckpoint(cp cdc.Checkpoint) ([]byte, error) {
	var sc storedCheckpoint
	sc.Meta = cp.Meta
	switch {
	case cp.Source == nil:
		sc.Source = json.RawMessage("null")
	case json.Valid(cp.Source):
		sc.Source = json.RawMessage(cp.Source)
	default:
		t := string(cp.Source)
		sc.SourceText = &t
	}
	switch {
	case cp.Sink == nil:
	case json.Valid(cp.Sink):
		sc.Sink = json.RawMessage(cp.Sink)
	default:
		t := string(cp.Sink)
		sc.SinkText = &t
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

func unmarshalCheckpoint(raw []byte) (*cdc.Checkpoint, error) {
	var sc storedCheckpoint
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", raw, err)
	}
	cp := &cdc.Checkpoint{Meta: sc.Meta}
	switch {
	case sc.SourceText != nil:
		cp.Source = cdc.Position(*sc.SourceText)
	case len(sc.Source) > 0 && string(sc.Source) != "null":
		cp.Source = cdc.Position(sc.Source)
	}
	switch {
	case sc.SinkText != nil:
		cp.Sink = []byte(*sc.SinkText)
	case len(sc.Sink) > 0 && string(sc.Sink) != "null":
		cp.Sink = []byte(sc.Sink)
	}
	return cp, nil
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
	cp, err := readCheckpoint(ctx, conn, sql, s.cfg.Pipeline)
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
	b, err := marshalCheckpoint(*next)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, sql.saveCheckpoint, s.cfg.Pipeline, b); err != nil {
		return fmt.Errorf("postgres sink: write checkpoint of %q to %s: %w", s.cfg.Pipeline, sql.checkpoints, err)
	}
	return nil
}
