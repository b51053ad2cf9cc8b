package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdCount: {count: "c", query, skip, limit} -> {n}.
func (s *Server) cmdCount(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	q := a.doc("query")
	skip, _ := a.int64("skip")
	limit, _ := a.int64("limit")
	if a.err != nil {
		return nil, a.err
	}
	if skip < 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Skip value must be non-negative, but received: %d", skip)
	}
	if limit < 0 { // a negative limit counts as its absolute value
		limit = -limit
	}
	n, err := s.data(ctx).CountWith(ns, store.FindSpec{Filter: q, Skip: skip, Limit: limit, Collation: collationArg(r.cmd)})
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}
