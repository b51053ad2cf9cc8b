package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// Config configures a Sink. Its yaml tags are the sink.postgres section of
// a pipeline file, and DefaultConfig holds the defaults of both a file and
// a program: start from it (create_table and soft_delete are true there;
// a zero Config has them false). In a file the table defaults to the
// source's collection (FitSource).
type Config struct {
	DSN    string `yaml:"dsn" secret:"uri"` // libpq URL or keyword/value string; required
	Schema string `yaml:"schema"`           // default "public"
	Table  string `yaml:"table"`            // required; may hold {db} and {coll}: a table per namespace
	Mode   string `yaml:"mode"`             // ModeMirror (default) or ModeAppend

	// Columns is the layout of a new table: ColumnsAuto (typed columns
	// from the documents' fields, the default; in append mode besides
	// the envelope's columns) or ColumnsDocument (the document in one
	// jsonb column; append: the envelope's columns only). An existing
	// table keeps the layout it has.
	Columns string `yaml:"columns"`
	// FlattenDepth is how many levels of nested objects become columns
	// of their own in a typed table: 0 makes each top-level field a
	// column (objects as jsonb); 1, DefaultConfig's, makes address.city
	// the column address__city. Deeper values are jsonb.
	FlattenDepth int `yaml:"flatten_depth"`
	// ColumnTypes pins the type of a typed table's columns, by column
	// name (address__city): text, integer, bigint, double precision,
	// numeric, numeric(p,s), boolean, timestamptz, uuid, bytea or jsonb.
	// A pinned column never widens; a value it cannot hold exactly goes
	// to _tide_overflow.
	ColumnTypes map[string]string `yaml:"column_types"`

	// CreateTable creates the table, if missing, on Open.
	CreateTable bool `yaml:"create_table"`
	// SoftDelete marks deleted documents (_tide_deleted) in mirror mode
	// instead of deleting their rows.
	SoftDelete bool `yaml:"soft_delete"`

	// PartialUpdates says that the source's updates may come without
	// their full document, with an update description instead (a
	// MongoDB source with full_document delta or when_available):
	// mirror mode then sets only the fields the description changes. A
	// pipeline file sets it from the source (FitSource). Without it, an
	// update without its full document changes nothing: update_lookup
	// gives one for a document deleted since, whose delete follows.
	PartialUpdates bool `yaml:"-"`

	// Pipeline names the row of tide_checkpoints; required once
	// Sink.Checkpoints switched the sink to keep the checkpoint.
	Pipeline string `yaml:"-"`

	// RetryTimeout, if set, bounds the retries of a batch after
	// connection errors, overriding the pipeline's retry.max_elapsed;
	// outside a pipeline the default is DefaultRetryTimeout.
	RetryTimeout time.Duration `yaml:"-"`
	// LockTimeout bounds the wait for the pipeline's lock, held by the
	// session of another tide running the pipeline, or of one killed
	// moments ago; default DefaultLockTimeout. Only when the sink keeps
	// the checkpoint.
	LockTimeout time.Duration `yaml:"-"`

	Logger *slog.Logger `yaml:"-"`
}

// Sink writes records to a PostgreSQL table. It implements cdc.Sink.
// Open, Put, Commit and Close are called from one goroutine.
type Sink struct {
	cfg   Config
	log   *slog.Logger
	sql   statements
	ckpts *Checkpoints // nil unless the sink keeps the checkpoint

	conn    *pgx.Conn
	lostPID uint32 // server process of a connection lost mid-batch; 0 if none

	policy cdc.RetryPolicy // SetRetry's; zero outside a pipeline
	report cdc.RetryFunc   // SetRetry's; nil outside a pipeline

	opened bool
	stage  stage
	dead   deadLetters // the pipeline's dead letters of the batch (deadletter.go)

	// The tables written: one, or with {db} or {coll} in Config.Table,
	// one per name the namespaces render to, in order of first use.
	templated  bool
	collTables bool // the template has {coll}: a table is one collection's, and follows its drop and rename
	tables     []*table
	byNS       map[string]int // namespace -> index in tables
	byName     map[string]int // table name -> index in tables

	pins         map[string]*pin // Config.ColumnTypes, parsed
	columnsReady bool            // tide_columns exists
	session      int             // counts connections, so that a new one makes its staging tables again
	stageGen     int             // names the staging tables of typed tables

	drift driftCounter // values of typed tables that went to _tide_overflow, by table and column
}

// New returns a sink as cfg says. It does no I/O: Open (or, when the sink
// keeps the checkpoint, Checkpoints().Load) connects.
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{cfg: cfg, log: log.With("sink", "postgres", "table", cfg.Schema+"."+cfg.Table)}
	s.stage.mirror = cfg.Mode == ModeMirror
	s.stage.partial = s.stage.mirror && cfg.PartialUpdates
	s.templated = isTemplate(cfg.Table)
	for name, typ := range cfg.ColumnTypes {
		if p, err := parsePin(typ); err == nil { // Validate reports the others
			if s.pins == nil {
				s.pins = map[string]*pin{}
			}
			s.pins[name] = &p
		}
	}
	s.collTables = strings.Contains(cfg.Table, "{coll}")
	return s
}

// KeepCheckpoints is Checkpoints as a cdc.CheckpointKeeper.
func (s *Sink) KeepCheckpoints() cdc.CheckpointStore { return s.Checkpoints() }

// Checkpoints switches the sink to keep the pipeline's checkpoint
// (checkpoint: sink) and returns the store to give the pipeline: from then
// on, each Commit writes its checkpoint in the batch's transaction, to the
// row of tide_checkpoints named Config.Pipeline. Call it before Open; it
// returns the same store every time. This is the one switch: a sink whose
// Checkpoints was never called writes no checkpoint.
func (s *Sink) Checkpoints() *Checkpoints {
	if s.ckpts == nil {
		s.ckpts = &Checkpoints{s: s}
	}
	return s.ckpts
}

// keepsCheckpoint reports whether Checkpoints switched the sink on.
func (s *Sink) keepsCheckpoint() bool { return s.ckpts != nil }

var _ cdc.Sink = (*Sink)(nil)

func (s *Sink) check() error {
	errs := []error{s.cfg.Validate()}
	if s.cfg.Table == "" {
		errs = append(errs, errors.New("table: required"))
	}
	if s.keepsCheckpoint() && s.cfg.Pipeline == "" {
		errs = append(errs, errors.New("pipeline: required to keep the checkpoint in the sink"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	return nil
}

// Open connects, and creates or checks the table (and tide_checkpoints
// when the sink keeps the checkpoint). Every problem is reported here, before the
// source is opened: a bad DSN, an unreachable server, a refused password,
// an incompatible table.
func (s *Sink) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.conn == nil { // Checkpoints().Load may have connected
		s.sql = newStatements(s.cfg)
		if err := s.connectRetrying(ctx); err != nil {
			return err
		}
	}
	s.tables, s.byNS, s.byName = nil, map[string]int{}, map[string]int{}
	if !s.templated {
		s.tables = []*table{{name: s.cfg.Table, sql: s.sql, idx: 0}}
	}
	if err := s.prepareSchema(ctx); err != nil {
		return err
	}
	s.opened = true
	return nil
}

// Put copies batch into the sink's buffers: document keys and documents
// as Extended JSON in mirror mode, the encoded envelopes in append mode.
// Nothing reaches the server until Commit. A record it refuses drops the
// whole batch staged since the last Commit: the pipeline stops, and the
// batch is read again after a restart.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	if !s.opened {
		return errors.New("postgres sink: Put before Open")
	}
	for i := range batch {
		var tbl int
		var err error
		if s.stage.mirror && resnapshotEnd(&batch[i]) {
			if err := s.putResnapshotEnd(&batch[i]); err != nil {
				s.stage.reset()
				return err
			}
			continue
		}
		if s.collTables && s.stage.mirror && (batch[i].Op == cdc.OpDrop || batch[i].Op == cdc.OpRename) {
			if err := s.putCollOp(&batch[i]); err != nil {
				s.stage.reset()
				return err
			}
			continue
		}
		if !s.stage.mirror || documentOp(batch[i].Op) {
			// A collection event (a drop, a rename) changes no row of a
			// mirror, and must not create its table.
			tbl, err = s.tableOf(&batch[i])
		}
		if err == nil {
			err = s.stage.add(&batch[i], tbl)
		}
		if err != nil {
			s.stage.reset()
			return err
		}
	}
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
