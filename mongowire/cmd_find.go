package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdFind: {find: "c", filter, sort, projection, skip, limit, batchSize,
// singleBatch} -> {cursor: {firstBatch, id, ns}}.
func (s *Server) cmdFind(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	spec := store.FindSpec{
		Filter:     a.doc("filter"),
		Sort:       a.doc("sort"),
		Projection: a.doc("projection"),
	}
	skip, _ := a.int64("skip")
	limit, _ := a.int64("limit")
	single := a.bool("singleBatch")
	tailable := a.bool("tailable")
	if a.err != nil {
		return nil, a.err
	}
	batch, err := cursorBatchSize(r.name, r.cmd)
	if err != nil {
		return nil, err
	}
	switch {
	case skip < 0:
		return nil, mongoerr.New(mongoerr.BadValue, "Skip value must be non-negative, but received: %d", skip)
	case limit < 0:
		return nil, mongoerr.New(mongoerr.BadValue, "Limit value must be non-negative, but received: %d", limit)
	case tailable && ns == oplogNS:
		return nil, mongoerr.New(mongoerr.BadValue, "tailable cursors on %s are not supported by this server: read changes with a change stream", ns)
	case tailable:
		return nil, mongoerr.New(mongoerr.BadValue, "error processing query: tailable cursor requested on non capped collection %s", ns)
	}
	spec.Skip, spec.Limit = skip, limit
	var docs []bson.Raw
	if ns == oplogNS {
		docs, err = findOplog(s.store.Oplog(), spec)
	} else {
		docs, err = s.data(ctx).Find(ns, spec)
	}
	if err != nil {
		return nil, err
	}
	return s.openCursor(ctx, ns.String(), &sliceSource{docs: docs}, cursorOptions{batchSize: batch, singleBatch: single})
}
