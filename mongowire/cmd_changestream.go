package mongowire

import (
	"bytes"
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/changestream"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// openChangeStreamSource is the server's change-stream engine (the
// openChangeStream hook): it validates the $changeStream pipeline of an
// aggregate (coll is "" for aggregate: 1) and returns a stream positioned
// at its start point. The stream's batches carry their own
// postBatchResumeToken, so there are no first-reply extras.
func (s *Server) openChangeStreamSource(ctx context.Context, db, coll string, cmd bson.Raw) (cursorSource, bson.D, error) {
	v, err := cmd.LookupErr("pipeline")
	if err != nil {
		return nil, nil, missingField("aggregate.pipeline")
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type, expected type 'array'")
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, nil, mongoerr.New(mongoerr.InvalidBSON, "aggregate.pipeline: %v", err)
	}
	stages := make([]bson.Raw, len(vals))
	for i, sv := range vals {
		d, ok := sv.DocumentOK()
		if !ok {
			return nil, nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		stages[i] = d
	}
	spec, err := changestream.Parse(db, coll, stages)
	if err != nil {
		return nil, nil, err
	}
	// The stream reads the oplog and the committed documents, whatever
	// the statement that opened it: the store itself, not a transaction
	// (mongod refuses $changeStream in a transaction, and so does txn.go).
	committed := s.data(ctx).outsideTxn()
	st, err := changestream.Open(spec, committed, lookupCurrent(committed))
	if err != nil {
		return nil, nil, changestream.LabelError(err)
	}
	return labelledStream{st}, nil, nil
}

// lookupCurrent returns how the stream finds the current version of a
// document in st for fullDocument: "updateLookup": nil when the document
// is gone, or when the collection was dropped and recreated since (another
// UUID).
func lookupCurrent(st *store.Store) func(ns store.Namespace, uuid bson.Binary, docKey bson.Raw) (bson.Raw, error) {
	return func(ns store.Namespace, uuid bson.Binary, docKey bson.Raw) (bson.Raw, error) {
		info, ok := st.Collection(ns)
		if !ok || len(uuid.Data) > 0 && !bytes.Equal(info.UUID.Data, uuid.Data) {
			return nil, nil
		}
		docs, err := st.Find(ns, store.FindSpec{Filter: docKey, Limit: 1})
		if err != nil || len(docs) == 0 {
			return nil, err
		}
		return docs[0], nil
	}
}

// labelledStream labels the errors of a change-stream getMore as mongod
// does, so that drivers resume after transient failures and stop after
// fatal ones.
type labelledStream struct{ *changestream.Stream }

func (l labelledStream) Next(ctx context.Context, n, maxBytes int, maxWait time.Duration) ([]bson.Raw, bson.D, bool, error) {
	docs, extra, exhausted, err := l.Stream.Next(ctx, n, maxBytes, maxWait)
	return docs, extra, exhausted, changestream.LabelError(err)
}

// LabelError labels the errors of a getMore on this cursor that do not come
// from Next (the failGetMoreAfterCursorCheckout fail point) as Next's own.
func (labelledStream) LabelError(err error) error { return changestream.LabelError(err) }
