package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tide-cdc/tide/cdc"
)

// Modes.
const (
	ModeMirror = "mirror"
	ModeAppend = "append"
)

// DefaultLockTimeout bounds how long a sink waits for the pipeline's lock:
// long enough for the server session of a killed tide to end.
const DefaultLockTimeout = 15 * time.Second

// DefaultRetryTimeout bounds how long a batch is retried after connection
// errors before the pipeline fails.
const DefaultRetryTimeout = time.Minute

// Config configures a Sink. The zero value of a field means its default.
// Its yaml tags are the sink.postgres section of a pipeline file (where
// create_table and soft_delete default to true, and table to the source's
// collection).
type Config struct {
	DSN    string `yaml:"dsn"`    // libpq URL or keyword/value string; required
	Schema string `yaml:"schema"` // default "public"
	Table  string `yaml:"table"`  // required
	Mode   string `yaml:"mode"`   // ModeMirror (default) or ModeAppend

	// CreateTable creates the table, if missing, on Open.
	CreateTable bool `yaml:"create_table"`
	// SoftDelete marks deleted documents (_tide_deleted) in mirror mode
	// instead of deleting their rows.
	SoftDelete bool `yaml:"soft_delete"`

	// Pipeline names the row of tide_checkpoints; required with
	// CheckpointInSink.
	Pipeline string `yaml:"-"`
	// CheckpointInSink writes the checkpoint in each batch's transaction.
	// Pass WithCheckpoint() to the runtime so that it loads it from here.
	CheckpointInSink bool `yaml:"-"`

	// RetryTimeout bounds the retries of a batch after connection errors;
	// default DefaultRetryTimeout.
	RetryTimeout time.Duration `yaml:"-"`
	// LockTimeout bounds the wait for the pipeline's lock, held by the
	// session of another tide running the pipeline, or of one killed
	// moments ago; default DefaultLockTimeout. With CheckpointInSink only.
	LockTimeout time.Duration `yaml:"-"`

	Logger *slog.Logger `yaml:"-"`
}

// Sink writes records to a PostgreSQL table. It implements cdc.Sink and
// cdc.Transactional; WithCheckpoint returns it as a cdc.CheckpointStore.
// Open, Begin, Put, Commit, Abort and Close are called from one goroutine.
type Sink struct {
	cfg Config
	log *slog.Logger
	sql statements

	conn    *pgx.Conn
	lostPID uint32 // server process of a connection lost mid-batch; 0 if none

	opened bool
	stage  stage
}

// New returns a sink as cfg says. It does no I/O: Open (or LoadCheckpoint)
// connects.
func New(cfg Config) *Sink {
	if cfg.Schema == "" {
		cfg.Schema = "public"
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeMirror
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = DefaultLockTimeout
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{cfg: cfg, log: log.With("sink", "postgres", "table", cfg.Schema+"."+cfg.Table)}
	s.stage.mirror = cfg.Mode == ModeMirror
	return s
}

// Checkpointed is a Sink that stores the pipeline's checkpoint
// (checkpoint: sink): a cdc.CheckpointStore.
type Checkpointed struct{ *Sink }

// WithCheckpoint returns s as a cdc.CheckpointStore, for a sink configured
// with CheckpointInSink. A plain *Sink is not one, so that the runtime
// keeps checkpoints in its own store otherwise.
func (s *Sink) WithCheckpoint() Checkpointed { return Checkpointed{s} }

var (
	_ cdc.Sink            = (*Sink)(nil)
	_ cdc.Transactional   = (*Sink)(nil)
	_ cdc.CheckpointStore = Checkpointed{}
)

func (s *Sink) check() error {
	var errs []error
	if s.cfg.DSN == "" {
		errs = append(errs, errors.New("dsn: required"))
	}
	if s.cfg.Table == "" {
		errs = append(errs, errors.New("table: required"))
	}
	switch s.cfg.Mode {
	case ModeMirror, ModeAppend:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want %s or %s", s.cfg.Mode, ModeMirror, ModeAppend))
	}
	if s.cfg.CheckpointInSink && s.cfg.Pipeline == "" {
		errs = append(errs, errors.New("pipeline: required to keep the checkpoint in the sink"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	return nil
}

// Open connects, and creates or checks the table (and tide_checkpoints
// with CheckpointInSink). Every problem is reported here, before the
// source is opened: a bad DSN, an unreachable server, a refused password,
// an incompatible table.
func (s *Sink) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.conn == nil { // LoadCheckpoint may have connected
		s.sql = newStatements(s.cfg)
		if err := s.connect(ctx); err != nil {
			return err
		}
	}
	if err := s.prepareSchema(ctx); err != nil {
		return err
	}
	s.opened = true
	return nil
}

// Begin starts a batch. Nothing reaches the server until Commit.
func (s *Sink) Begin(context.Context) error {
	if !s.opened {
		return errors.New("postgres sink: Begin before Open")
	}
	s.stage.reset()
	return nil
}

// Put copies batch into the sink's buffers: document keys and documents
// as Extended JSON in mirror mode, the encoded envelopes in append mode.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	for i := range batch {
		if err := s.stage.add(&batch[i]); err != nil {
			return err
		}
	}
	return nil
}

// Abort drops the batch. Commit rolls back a failed transaction itself,
// so there is no server state to undo.
func (s *Sink) Abort(context.Context) error {
	s.stage.reset()
	return nil
}

// Close closes the connection.
func (s *Sink) Close() error {
	s.opened = false
	s.stage.reset()
	if s.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.conn.Close(ctx)
	s.conn = nil
	if err != nil {
		return fmt.Errorf("close postgres connection: %w", err)
	}
	return nil
}
