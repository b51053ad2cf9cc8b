package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/sinkcheckpoint"
)

// Checkpoints is the checkpoint store of a sink that keeps the pipeline's
// checkpoint in the target deployment (checkpoint: sink): the document
// {_id: pipeline} of tide_checkpoints, written in the transaction of the
// changes it covers, which makes the sink exactly-once. Get it from
// Sink.Checkpoints and pass it to the pipeline as its
// pipeline.Checkpointer.
type Checkpoints struct {
	s *Sink

	ledger sinkcheckpoint.Ledger // what Commit wrote, for Save to find
}

// checkpointDoc is a document of tide_checkpoints.
type checkpointDoc struct {
	Checkpoint string   `bson:"checkpoint,omitempty"` // JSON, see sinkcheckpoint.Marshal
	Epoch      int64    `bson:"epoch"`
	Session    bson.Raw `bson:"session,omitempty"` // {id: UUID}: the session of the tide that took the epoch
}

func (s *Sink) checkpointCollection() *mongo.Collection {
	return s.client.Database(s.cfg.CheckpointDatabase).Collection(CheckpointCollection)
}

// Load returns the pipeline's checkpoint, or nil if it has none. It
// connects and takes the pipeline over: it ends the transaction a killed
// (or still running) tide left open, by killing that tide's session, and
// increments the document's epoch, which every later transaction of this
// sink checks, so that a tide that was running the pipeline fails at its
// next commit instead of writing after this one. Call it before Open, as
// the pipeline does.
func (c *Checkpoints) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	s := c.s
	if err := s.check(); err != nil {
		return nil, err
	}
	if pipeline != s.cfg.Pipeline {
		return nil, fmt.Errorf("mongo sink: asked for the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, s.cfg.Pipeline)
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if s.sess == nil {
		sess, err := s.client.StartSession()
		if err != nil {
			return nil, fmt.Errorf("mongo sink: start session: %w", err)
		}
		s.sess = sess
	}
	doc, err := takeOver(ctx, s.client, s.cfg, s.sess.ID(), s.log)
	if err != nil {
		return nil, err
	}
	s.epoch = doc.Epoch
	if doc.Checkpoint == "" {
		return nil, nil
	}
	cp, err := sinkcheckpoint.Unmarshal([]byte(doc.Checkpoint))
	if err != nil {
		return nil, fmt.Errorf("mongo sink: checkpoint of %q in %s.%s: %w", pipeline, s.cfg.CheckpointDatabase, CheckpointCollection, err)
	}
	return cp, nil
}

// takeOver kills the session recorded in the pipeline's checkpoint
// document, then increments its epoch and records session as the
// owner's, and returns the document after that.
func takeOver(ctx context.Context, client *mongo.Client, cfg Config, session bson.Raw, log interface {
	Warn(string, ...any)
}) (*checkpointDoc, error) {
	db := client.Database(cfg.CheckpointDatabase)
	where := cfg.CheckpointDatabase + "." + CheckpointCollection
	if err := db.CreateCollection(ctx, CheckpointCollection); err != nil {
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != codeNamespaceExists {
			return nil, fmt.Errorf("mongo sink: create %s: %w", where, err)
		}
	}
	coll := db.Collection(CheckpointCollection)
	var prev checkpointDoc
	err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: cfg.Pipeline}}).Decode(&prev)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongo sink: read checkpoint of %q from %s: %w", cfg.Pipeline, where, err)
	}
	if len(prev.Session) > 0 && !bytes.Equal(prev.Session, session) {
		// Its open transaction would otherwise hold the checkpoint
		// document until the server's transaction lifetime limit.
		err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "killSessions", Value: bson.A{prev.Session}}}).Err()
		if err != nil {
			log.Warn("could not kill the session of the pipeline's previous owner; its open transaction ends at the server's transaction lifetime limit", "err", err)
		}
	}
	var doc checkpointDoc
	err = coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: cfg.Pipeline}},
		bson.D{
			{Key: "$inc", Value: bson.D{{Key: "epoch", Value: int64(1)}}},
			{Key: "$set", Value: bson.D{{Key: "session", Value: session}, {Key: "owned_since", Value: bson.DateTime(time.Now().UnixMilli())}}},
		},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return nil, fmt.Errorf("mongo sink: take over the checkpoint of %q in %s: %w", cfg.Pipeline, where, err)
	}
	return &doc, nil
}

// Save writes nothing: Commit already wrote cp in the transaction of the
// changes it covers, and the pipeline calls Save only after that Commit
// returned. Save only checks that this sink committed cp, so that a store
// given to the wrong pipeline fails at once.
func (c *Checkpoints) Save(_ context.Context, pipeline string, cp cdc.Checkpoint) error {
	if pipeline != c.s.cfg.Pipeline {
		return fmt.Errorf("mongo sink: asked to save the checkpoint of pipeline %q, but the sink writes that of %q", pipeline, c.s.cfg.Pipeline)
	}
	ok, err := c.ledger.Saved(cp)
	switch {
	case err != nil:
		return fmt.Errorf("mongo sink: %w", err)
	case ok:
		return nil
	}
	return fmt.Errorf("mongo sink: checkpoint at %s was not committed by this sink: pass Sink.Checkpoints only to the pipeline writing to that sink", cp.Source)
}

// dial connects for the checkpoint commands.
func dial(ctx context.Context, cfg Config) (*Sink, error) {
	s := New(cfg)
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ReadCheckpoint returns the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints, or nil if it has none, without taking the pipeline
// over, so that it works while the pipeline runs (tide checkpoint show).
func ReadCheckpoint(ctx context.Context, cfg Config) (*cdc.Checkpoint, error) {
	s, err := dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var doc checkpointDoc
	err = s.checkpointCollection().FindOne(ctx, bson.D{{Key: "_id", Value: cfg.Pipeline}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mongo sink: read checkpoint of %q from %s.%s: %w", cfg.Pipeline, s.cfg.CheckpointDatabase, CheckpointCollection, err)
	}
	if doc.Checkpoint == "" {
		return nil, nil
	}
	return sinkcheckpoint.Unmarshal([]byte(doc.Checkpoint))
}

// RewriteCheckpoint replaces the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints with what change returns for it (tide checkpoint set,
// tide snapshot). It takes the pipeline over as a starting tide does, so
// a tide still running the pipeline stops at its next commit instead of
// overwriting the new checkpoint. change sees nil when there is no
// checkpoint, and writes nothing by returning nil.
func RewriteCheckpoint(ctx context.Context, cfg Config, change func(*cdc.Checkpoint) (*cdc.Checkpoint, error)) error {
	return takenOver(ctx, cfg, "rewritten", func(doc *checkpointDoc) (string, bool, error) {
		var cp *cdc.Checkpoint
		if doc.Checkpoint != "" {
			var err error
			if cp, err = sinkcheckpoint.Unmarshal([]byte(doc.Checkpoint)); err != nil {
				return "", false, fmt.Errorf("mongo sink: checkpoint of %q: %w", cfg.Pipeline, err)
			}
		}
		next, err := change(cp)
		if err != nil || next == nil {
			return "", false, err
		}
		b, err := sinkcheckpoint.Marshal(*next)
		if err != nil {
			return "", false, fmt.Errorf("mongo sink: %w", err)
		}
		return string(b), true, nil
	})
}

// DeleteCheckpoint deletes the checkpoint that cfg.Pipeline keeps in
// tide_checkpoints (tide checkpoint reset), taking the pipeline over first
// as RewriteCheckpoint does. The documents the sink wrote stay: a mirror
// converges again as the next run replays, an append collection gets
// those events a second time.
func DeleteCheckpoint(ctx context.Context, cfg Config) error {
	return takenOver(ctx, cfg, "deleted", func(*checkpointDoc) (string, bool, error) { return "", true, nil })
}

// takenOver takes the pipeline over as a starting tide does, then writes
// the checkpoint next returns for the document it found, if it says so,
// unless another tide took the pipeline over in between. what says what
// was being done, for that error.
func takenOver(ctx context.Context, cfg Config, what string, next func(*checkpointDoc) (string, bool, error)) error {
	s, err := dial(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("mongo sink: start session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	doc, err := takeOver(ctx, s.client, s.cfg, sess.ID(), s.log)
	if err != nil {
		return err
	}
	cp, write, err := next(doc)
	if err != nil || !write {
		return err
	}
	res, err := s.checkpointCollection().UpdateOne(ctx, bson.D{{Key: "_id", Value: cfg.Pipeline}, {Key: "epoch", Value: doc.Epoch}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "checkpoint", Value: cp}, {Key: "updated_at", Value: bson.DateTime(time.Now().UnixMilli())}}}})
	if err != nil {
		return fmt.Errorf("mongo sink: write checkpoint of %q: %w", cfg.Pipeline, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("mongo sink: checkpoint of %q: %w while it was %s; run the command again", cfg.Pipeline, errFenced, what)
	}
	return nil
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
