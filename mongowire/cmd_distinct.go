package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdDistinct: {distinct: "c", key, query} -> {values}.
func (s *Server) cmdDistinct(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	key, ok := a.string("key")
	q := a.doc("query")
	if a.err != nil {
		return nil, a.err
	}
	if !ok {
		return nil, missingField("distinct.key")
	}
	at, snapshot := s.snapshotAt(ctx, r)
	var vals []bson.RawValue
	spec := store.FindSpec{Filter: q, Collation: collationArg(r.cmd)}
	if snapshot {
		vals, err = s.data(ctx).DistinctAtWith(ns, key, spec, at)
	} else {
		vals, err = s.data(ctx).DistinctWith(ns, key, spec)
	}
	if err != nil {
		return nil, err
	}
	out := make(bson.A, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	reply := bson.D{{Key: "values", Value: out}}
	if snapshot { // a snapshot session's driver takes its time from here
		reply = append(reply, bson.E{Key: "atClusterTime", Value: at})
	}
	return reply, nil
}
