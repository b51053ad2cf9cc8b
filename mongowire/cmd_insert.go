package mongowire

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdInsert: {insert: "c", documents: [...], ordered} -> {n, writeErrors?}.
func (s *Server) cmdInsert(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	docs, ordered, err := writeBatch(r, "documents")
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	bypassTs := a.bool("bypassEmptyTsReplacement")
	opts := store.InsertOptions{Ordered: ordered, BypassValidation: a.bool("bypassDocumentValidation")}
	if a.err != nil {
		return nil, a.err
	}
	if !bypassTs {
		docs = fillEmptyTimestamps(docs, s.data(ctx).Now)
	}
	n, errs := s.insert(ctx, ns, docs, opts)
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(errs) > 0 {
		we := make(bson.A, len(errs))
		for i, e := range errs {
			we[i] = writeErrorDoc(e.Index, e.Err)
		}
		reply = append(reply, bson.E{Key: "writeErrors", Value: we})
	}
	return reply, nil
}

// insert refuses documents over the 16 MiB BSON limit (a message may carry
// up to 48 MB) and hands the rest to the store, keeping the statement
// indexes and the ordered semantics of the whole batch.
func (s *Server) insert(ctx context.Context, ns store.Namespace, docs []bson.Raw, opts store.InsertOptions) (int, []store.WriteError) {
	ordered := opts.Ordered
	var (
		ok      []bson.Raw
		indexes []int
		errs    []store.WriteError
	)
	for i, d := range docs {
		if len(d) > maxBSONObjectSize {
			errs = append(errs, store.WriteError{Index: i, Err: mongoerr.New(mongoerr.BSONObjectTooLarge,
				"object to insert too large. size in bytes: %d, max size: %d", len(d), maxBSONObjectSize)})
			if ordered {
				break
			}
			continue
		}
		ok = append(ok, d)
		indexes = append(indexes, i)
	}
	if len(errs) == 0 {
		return s.data(ctx).InsertWith(ns, docs, opts)
	}
	if len(ok) == 0 {
		return 0, errs
	}
	n, storeErrs := s.data(ctx).InsertWith(ns, ok, opts)
	if ordered && len(storeErrs) > 0 {
		errs = nil // the store stopped before the oversized document
	}
	for _, e := range storeErrs {
		e.Index = indexes[e.Index]
		errs = append(errs, e)
	}
	slices.SortFunc(errs, func(a, b store.WriteError) int { return a.Index - b.Index })
	return n, errs
}
