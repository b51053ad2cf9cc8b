package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
)

var _ cdc.DeadLetterSink = (*Sink)(nil)

// PutDeadLetters stages the pipeline's dead letters (changes that failed
// to decode, transform or encode) for the batch's Commit, which writes
// them to the dead-letter collection: in the batch's last transaction
// when the sink keeps the checkpoint, so that exactly-once holds for them
// too.
func (s *Sink) PutDeadLetters(_ context.Context, letters []cdc.DeadLetter) error {
	for _, l := range letters {
		l.Event = cloneEvent(l.Event) // the runtime reuses the batch's memory
		s.stage.letters = append(s.stage.letters, l)
	}
	return nil
}

func cloneEvent(ev cdc.Event) cdc.Event {
	ev.Pos = append(cdc.Position(nil), ev.Pos...)
	for _, b := range []*[]byte{&ev.DocumentKey, &ev.FullDocument, &ev.PreImage, &ev.UpdateDesc, &ev.Payload} {
		if *b != nil {
			*b = append([]byte(nil), *b...)
		}
	}
	return ev
}

// writePipelineLetters upserts the staged letters into the dead-letter
// collection, by an _id made of the pipeline and the position, as the
// sink's own refused documents are.
func (s *Sink) writePipelineLetters(ctx context.Context) error {
	coll := s.deadLetterCollection()
	models := make([]mongo.WriteModel, 0, len(s.stage.letters))
	for _, l := range s.stage.letters {
		ev := &l.Event
		doc := bson.D{
			{Key: "_id", Value: appendID(s.cfg.Pipeline, ev.Pos)},
			{Key: "pipeline", Value: s.cfg.Pipeline},
			{Key: "namespace", Value: ev.Namespace},
			{Key: "op", Value: string(ev.Op)},
			{Key: "position", Value: string(ev.Pos)},
			{Key: "document_key", Value: rawOrNil(ev.DocumentKey)},
			{Key: "document", Value: rawOrNil(ev.FullDocument)},
			{Key: "before", Value: rawOrNil(ev.PreImage)},
			{Key: "update_description", Value: rawOrNil(ev.UpdateDesc)},
			{Key: "payload", Value: ev.Payload},
			{Key: "stage", Value: l.Stage},
			{Key: "error", Value: l.Err},
			{Key: "at", Value: bson.DateTime(l.Time.UnixMilli())},
		}
		models = append(models, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: doc[0].Value}}).SetReplacement(doc).SetUpsert(true))
	}
	return s.writeLetters(ctx, coll, models)
}

// KeepDeadLetters is what on_error: dead_letter in a pipeline file does
// to the sink: a document the target refuses goes to the dead-letter
// collection (on_write_error: dead_letter, its older name), as the
// pipeline's own dead letters do.
func (c *Config) KeepDeadLetters() { c.OnWriteError = OnWriteErrorDeadLetter }

// ReadDeadLetters returns the dead letters of pipeline in the dead-letter
// collection, oldest first: `tide dead-letters list` and `replay` read
// them through this ability of the Config. A document the target
// refused is one of stage "sink".
func (c *Config) ReadDeadLetters(ctx context.Context, pipeline string) ([]cdc.DeadLetter, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(c.URI).SetTimeout(30 * time.Second))
	if err != nil {
		return nil, fmt.Errorf("mongo sink: connect: %w", err)
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	db, coll := c.CheckpointDatabase, c.DeadLetter
	if db == "" {
		db = DefaultCheckpointDatabase
	}
	if coll == "" {
		coll = DefaultDeadLetter
	}
	if d, cl, ok := cutNamespace(c.DeadLetter); ok {
		db, coll = d, cl
	}
	cur, err := client.Database(db).Collection(coll).Find(ctx, bson.D{{Key: "pipeline", Value: pipeline}},
		options.Find().SetSort(bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongo sink: read %s.%s: %w", db, coll, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var out []cdc.DeadLetter
	for cur.Next(ctx) {
		var l struct {
			Namespace  string        `bson:"namespace"`
			Op         string        `bson:"op"`
			Position   string        `bson:"position"`
			Key        bson.Raw      `bson:"document_key"`
			Document   bson.Raw      `bson:"document"`
			Before     bson.Raw      `bson:"before"`
			UpdateDesc bson.Raw      `bson:"update_description"`
			Payload    []byte        `bson:"payload"`
			Stage      string        `bson:"stage"`
			Error      string        `bson:"error"`
			At         bson.DateTime `bson:"at"`
		}
		if err := cur.Decode(&l); err != nil {
			return nil, fmt.Errorf("mongo sink: read %s.%s: %w", db, coll, err)
		}
		if l.Stage == "" {
			l.Stage = "sink"
		}
		out = append(out, cdc.DeadLetter{
			Event: cdc.Event{Pos: cdc.Position(l.Position), Op: cdc.Op(l.Op), Namespace: l.Namespace, DocumentKey: l.Key,
				FullDocument: l.Document, PreImage: l.Before, UpdateDesc: l.UpdateDesc, Payload: l.Payload},
			Stage: l.Stage, Err: l.Error, Time: l.At.Time(),
		})
	}
	return out, cur.Err()
}

// writeLetters writes the dead letters' upserts to coll; they count as
// dead-lettered here only outside a transaction (in one, once it commits).
func (s *Sink) writeLetters(ctx context.Context, coll *mongo.Collection, models []mongo.WriteModel) error {
	if _, err := coll.BulkWrite(ctx, models); err != nil {
		return fmt.Errorf("mongo sink: write %d dead letters to %s.%s: %w", len(models), coll.Database().Name(), coll.Name(), err)
	}
	if mongo.SessionFromContext(ctx) == nil {
		s.deadLettered.Add(int64(len(models)))
	}
	return nil
}
