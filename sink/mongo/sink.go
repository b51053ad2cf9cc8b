package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/tide-cdc/tide/cdc"
)

// Modes.
const (
	ModeMirror = "mirror"
	ModeAppend = "append"
)

// What to do with a document the target refuses (Config.OnWriteError).
const (
	OnWriteErrorFail       = "fail"
	OnWriteErrorDeadLetter = "dead_letter"
)

// Defaults.
const (
	DefaultDatabase           = "{db}"
	DefaultCollection         = "{coll}"
	DefaultWriteConcern       = "majority"
	DefaultCheckpointDatabase = "tide"
	CheckpointCollection      = "tide_checkpoints"
	DefaultDeadLetter         = "tide_dead_letters" // in the checkpoint database
	DefaultRetryTimeout       = time.Minute
	DefaultConnectTimeout     = 10 * time.Second
	// A transaction holds at most this many writes or bytes of documents;
	// a larger batch is split into several, each with its checkpoint.
	DefaultMaxTransactionWrites = 10000
	DefaultMaxTransactionBytes  = 16 << 20
)

// Config configures a Sink. The zero value of a field means its default.
// Its yaml tags are the sink.mongo section of a pipeline file.
type Config struct {
	// URI is the target's connection string; required. Package tide
	// replaces "embedded" with the URI of a second in-process server.
	URI string `yaml:"uri" secret:"uri"`
	// Database and Collection name the target collection of each event,
	// and may hold {db} and {coll}, filled from its namespace
	// ("db.coll"); default "{db}" and "{coll}": the source's names.
	Database   string `yaml:"database"`
	Collection string `yaml:"collection"`
	Mode       string `yaml:"mode"` // ModeMirror (default) or ModeAppend
	// WriteConcern is "majority" (default) or a number of members, at
	// least 1; writes are always journaled.
	WriteConcern string `yaml:"write_concern"`
	// Ordered writes each bulk write in event order, stopping at an
	// error; unordered ones go in parallel where no transaction holds
	// them. Default: true in append mode, false in mirror mode, where only
	// the last change of each document is written and order is moot.
	Ordered *bool `yaml:"ordered"`
	// ApplyDDL drops and renames target collections when the source's
	// are dropped or renamed; without it those events are logged and
	// counted.
	ApplyDDL bool `yaml:"apply_ddl"`
	// OnWriteError is OnWriteErrorFail (default: the pipeline fails,
	// naming the namespace and _id) or OnWriteErrorDeadLetter (the
	// refused change goes to the DeadLetter collection instead).
	OnWriteError string `yaml:"on_write_error"`
	// DeadLetter is the dead-letter collection, "coll" in the checkpoint
	// database or "db.coll"; default DefaultDeadLetter.
	DeadLetter string `yaml:"dead_letter"`
	// CheckpointDatabase holds tide_checkpoints when the sink keeps the
	// checkpoint (checkpoint: sink); default DefaultCheckpointDatabase.
	CheckpointDatabase string `yaml:"checkpoint_database"`

	// Pipeline names the pipeline: the _id of its checkpoint document
	// and the prefix of the _id of appended documents; required.
	Pipeline string `yaml:"-"`

	RetryTimeout         time.Duration `yaml:"-"` // default DefaultRetryTimeout outside a pipeline; in one, retry.max_elapsed unless set
	ConnectTimeout       time.Duration `yaml:"-"` // bounds Open's first contact; default DefaultConnectTimeout
	MaxTransactionWrites int           `yaml:"-"` // default DefaultMaxTransactionWrites
	MaxTransactionBytes  int           `yaml:"-"` // default DefaultMaxTransactionBytes

	Logger *slog.Logger `yaml:"-"`
}

// Stats counts what the sink did besides writing documents.
type Stats struct {
	DDLSkipped   int64 // drops and renames not applied (ApplyDDL false), and other DDL events
	DDLApplied   int64
	DeadLettered int64
	Transactions int64 // committed transactions (checkpoint: sink)
	Retries      int64 // writes or transactions tried again after a transient error
	// Resolved counts commits of unknown outcome that the checkpoint
	// document showed had succeeded: not written again.
	Resolved int64
}

// Sink writes records to MongoDB. It implements cdc.Sink. Open, Put,
// Commit and Close are called from one goroutine.
type Sink struct {
	cfg Config
	// retryTimeoutSet says that Config.RetryTimeout was given, which
	// then overrides the pipeline's retry.max_elapsed (SetRetry).
	retryTimeoutSet bool
	report          cdc.RetryFunc // SetRetry's; nil outside a pipeline
	ordered         bool
	wc              *writeconcern.WriteConcern
	log             *slog.Logger
	ckpts           *Checkpoints // nil unless the sink keeps the checkpoint

	client *mongo.Client
	sess   *mongo.Session // the session of the sink's transactions (checkpoint: sink)
	epoch  int64          // the fencing epoch Checkpoints.Load took
	opened bool

	stage   stage
	created map[string]bool // target namespaces known to exist

	ddlSkipped, ddlApplied, deadLettered, txns, retries, resolved atomic.Int64
}

// New returns a sink as cfg says. It does no I/O.
func New(cfg Config) *Sink {
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	if cfg.Collection == "" {
		cfg.Collection = DefaultCollection
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeMirror
	}
	if cfg.WriteConcern == "" {
		cfg.WriteConcern = DefaultWriteConcern
	}
	if cfg.OnWriteError == "" {
		cfg.OnWriteError = OnWriteErrorFail
	}
	if cfg.CheckpointDatabase == "" {
		cfg.CheckpointDatabase = DefaultCheckpointDatabase
	}
	retryTimeoutSet := cfg.RetryTimeout > 0
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = DefaultRetryTimeout
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.MaxTransactionWrites <= 0 {
		cfg.MaxTransactionWrites = DefaultMaxTransactionWrites
	}
	if cfg.MaxTransactionBytes <= 0 {
		cfg.MaxTransactionBytes = DefaultMaxTransactionBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{cfg: cfg, retryTimeoutSet: retryTimeoutSet, log: log.With("sink", "mongo", "uri", Redact(cfg.URI))}
	s.ordered = cfg.Mode == ModeAppend
	if cfg.Ordered != nil {
		s.ordered = *cfg.Ordered
	}
	s.stage.mirror = cfg.Mode == ModeMirror
	return s
}

var _ cdc.Sink = (*Sink)(nil)

// KeepCheckpoints is Checkpoints as a cdc.CheckpointKeeper.
func (s *Sink) KeepCheckpoints() cdc.CheckpointStore { return s.Checkpoints() }

// Checkpoints switches the sink to keep the pipeline's checkpoint
// (checkpoint: sink) and returns the store to give the pipeline: from then
// on every transaction of the sink writes its checkpoint to the document
// of Config.Pipeline in tide_checkpoints. Call it before Open.
func (s *Sink) Checkpoints() *Checkpoints {
	if s.ckpts == nil {
		s.ckpts = &Checkpoints{s: s}
	}
	return s.ckpts
}

func (s *Sink) keepsCheckpoint() bool { return s.ckpts != nil }

// Stats returns the sink's counters. It may be called from any goroutine.
func (s *Sink) Stats() Stats {
	return Stats{
		DDLSkipped: s.ddlSkipped.Load(), DDLApplied: s.ddlApplied.Load(), DeadLettered: s.deadLettered.Load(),
		Transactions: s.txns.Load(), Retries: s.retries.Load(), Resolved: s.resolved.Load(),
	}
}

func (s *Sink) check() error {
	if err := s.cfg.Validate(); err != nil {
		return fmt.Errorf("mongo sink: %w", err)
	}
	if s.cfg.Pipeline == "" {
		return errors.New("mongo sink: pipeline: required")
	}
	return nil
}

// writeConcern parses Config.WriteConcern; Validate has checked it.
func (s *Sink) writeConcern() *writeconcern.WriteConcern {
	j := true
	if s.cfg.WriteConcern == "majority" {
		return &writeconcern.WriteConcern{W: "majority", Journal: &j}
	}
	n, _ := strconv.Atoi(s.cfg.WriteConcern)
	return &writeconcern.WriteConcern{W: n, Journal: &j}
}

// connect connects and checks that the server answers (and, when the sink
// keeps the checkpoint, that it can run transactions). Its errors name
// the URI without its password.
func (s *Sink) connect(ctx context.Context) error {
	if s.client != nil {
		return nil
	}
	s.wc = s.writeConcern()
	opts := options.Client().ApplyURI(s.cfg.URI).SetAppName("tide").
		SetWriteConcern(s.wc).SetReadConcern(readconcern.Majority())
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(s.cfg.ConnectTimeout)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return fmt.Errorf("mongo sink: connect to %s: %w", Redact(s.cfg.URI), err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	var hello bson.M
	err = client.Database("admin").RunCommand(cctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
	if err != nil {
		client.Disconnect(context.WithoutCancel(ctx))
		return fmt.Errorf("mongo sink: connect to %s: %w", Redact(s.cfg.URI), describeConnectError(err))
	}
	if s.keepsCheckpoint() {
		_, rs := hello["setName"]
		if !rs && hello["msg"] != "isdbgrid" {
			client.Disconnect(context.WithoutCancel(ctx))
			return fmt.Errorf("mongo sink: %s is a standalone server: checkpoint: sink needs multi-document transactions, "+
				"which only a replica set or a sharded cluster runs", Redact(s.cfg.URI))
		}
	}
	s.client = client
	return nil
}

// describeConnectError says what an error of the first command means.
func describeConnectError(err error) error {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 18 || ce.Code == 13) {
		return fmt.Errorf("authentication refused (check the user, password and authSource): %w", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || mongo.IsTimeout(err) || mongo.IsNetworkError(err) {
		return fmt.Errorf("server unreachable: %w", err)
	}
	return err
}

// Open connects and checks the target. Every problem of the
// configuration or the connection is reported here.
func (s *Sink) Open(ctx context.Context, _ *cdc.Checkpoint) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := s.connect(ctx); err != nil {
		return err
	}
	if s.keepsCheckpoint() && s.sess == nil {
		return errors.New("mongo sink: the sink keeps the checkpoint, and Open was called before its Checkpoints().Load")
	}
	if s.created == nil {
		s.created = map[string]bool{}
	}
	s.stage.reset()
	s.opened = true
	return nil
}

// Put copies batch into the sink's buffers. Nothing reaches the server
// until Commit. A record it refuses drops what was put since the last
// Commit.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	if !s.opened {
		return errors.New("mongo sink: Put before Open")
	}
	for i := range batch {
		if err := s.stage.add(s, &batch[i]); err != nil {
			s.stage.reset()
			return err
		}
	}
	return nil
}

// Close ends the session and disconnects.
func (s *Sink) Close() error {
	s.opened = false
	s.stage.reset()
	if s.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.sess != nil {
		s.sess.EndSession(ctx)
		s.sess = nil
	}
	err := s.client.Disconnect(ctx)
	s.client = nil
	if err != nil {
		return fmt.Errorf("mongo sink: disconnect from %s: %w", Redact(s.cfg.URI), err)
	}
	return nil
}
