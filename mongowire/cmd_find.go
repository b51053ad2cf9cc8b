package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
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
		Collation:  collationArg(r.cmd),
	}
	skip, _ := a.int64("skip")
	limit, _ := a.int64("limit")
	single := a.bool("singleBatch")
	tailable := a.bool("tailable")
	returnKey, showRecordID := a.bool("returnKey"), a.bool("showRecordId")
	awaitData := a.bool("awaitData")
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
	case awaitData && !tailable:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot set 'awaitData' without also setting 'tailable'")
	case tailable && single:
		return nil, mongoerr.New(mongoerr.FailedToParse, "cannot use tailable option with the 'singleBatch' option")
	}
	spec.Skip, spec.Limit = skip, limit
	if err := letFind(r, &spec); err != nil {
		return nil, err
	}
	if spec.Collation.Type != 0 && (ns == oplogNS || ns == replsetNS || ns == versionNS) {
		if c, err := mql.ParseCollation(spec.Collation); err != nil || c != nil {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "a non-simple collation on the oplog or a local system collection is not supported by this server")
		}
	}
	if tailable {
		return s.findTailable(ctx, ns, spec, batch, awaitData) // tailable.go
	}
	var docs []bson.Raw
	at, snapshot := s.snapshotAt(ctx, r)
	switch {
	case ns == oplogNS:
		docs, err = findOplog(s.data(ctx).Oplog(), spec)
	case ns == replsetNS || ns == versionNS:
		static, _ := s.staticDocs(ctx, ns) // local_db.go
		docs, err = store.FindIn(static, spec)
	case snapshot:
		docs, err = s.data(ctx).FindAt(ns, spec, at)
	case returnKey || showRecordID:
		docs, err = s.findRecords(ns, spec, returnKey, showRecordID)
	default:
		docs, err = s.data(ctx).Find(ns, spec)
	}
	if err != nil {
		return nil, err
	}
	reply, err := s.openCursor(ctx, ns.String(), &sliceSource{docs: docs}, cursorOptions{batchSize: batch, singleBatch: single})
	if err == nil && snapshot {
		reply = withAtClusterTime(reply, at)
	}
	return reply, err
}
