package mongowire

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
	"github.com/tide-cdc/tide/internal/mongowire/store"
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
	case tailable:
		return nil, mongoerr.New(mongoerr.BadValue, "error processing query: tailable cursor requested on non capped collection %s", ns)
	}
	spec.Skip, spec.Limit = skip, limit
	docs, err := s.store.Find(ns, spec)
	if err != nil {
		return nil, err
	}
	return s.openCursor(ctx, ns.String(), &sliceSource{docs: docs}, cursorOptions{batchSize: batch, singleBatch: single})
}

// cmdGetMore: {getMore: <id>, collection: "c", batchSize, maxTimeMS} ->
// {cursor: {nextBatch, id, ns}}.
func (s *Server) cmdGetMore(ctx context.Context, c *conn, r *request) (bson.D, error) {
	idv := r.cmd.Index(0).Value()
	id, ok := idv.Int64OK()
	if !ok {
		return nil, typeMismatch(r.name, "getMore", idv, "long")
	}
	a := newArgs(r)
	coll, ok := a.string("collection")
	if a.err != nil {
		return nil, a.err
	}
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'getMore.collection' is missing but a required field")
	}
	batch, err := cursorBatchSize(r.name, r.cmd)
	if err != nil {
		return nil, err
	}
	maxTime, hasMaxTime := a.int64("maxTimeMS")
	if a.err != nil {
		return nil, a.err
	}
	cur, err := s.checkout(id, r.db+"."+coll)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(0)
	switch {
	case cur.awaitData && hasMaxTime:
		wait = time.Duration(maxTime) * time.Millisecond
	case cur.awaitData:
		wait = defaultAwaitWait
	case hasMaxTime && maxTime > 0:
		s.checkin(cur, false)
		return nil, mongoerr.New(mongoerr.BadValue, "cannot set maxTimeMS on getMore command for a non-awaitData cursor")
	}
	if s.cfg.EnableTestCommands {
		if act, ok := s.failpoints.matchPoint("failGetMoreAfterCursorCheckout", r, c.appName); ok && (act.closeConnection || act.errorCode != 0) {
			s.checkin(cur, true)
			if act.closeConnection {
				return nil, errCloseConn
			}
			var err error = mongoerr.New(act.errorCode, "Failing getMore via 'failGetMoreAfterCursorCheckout' failpoint")
			if l, ok := cur.src.(errorLabeler); ok {
				err = l.LabelError(err)
			}
			return nil, err
		}
	}
	n := 1<<31 - 1
	if batch > 0 {
		n = int(min(batch, int64(n)))
	}
	docs, extra, exhausted, err := cur.src.Next(ctx, n, maxBatchBytes, wait)
	if err != nil {
		s.checkin(cur, true)
		return nil, err
	}
	s.checkin(cur, exhausted)
	if exhausted {
		id = 0
	}
	return cursorReply("nextBatch", docs, extra, id, cur.ns), nil
}

// cmdKillCursors: {killCursors: "c", cursors: [ids]} ->
// {cursorsKilled, cursorsNotFound, cursorsAlive, cursorsUnknown}.
func (s *Server) cmdKillCursors(_ context.Context, _ *conn, r *request) (bson.D, error) {
	v, err := r.cmd.LookupErr("cursors")
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'killCursors.cursors' is missing but a required field")
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(r.name, "cursors", v, "array")
	}
	vals, _ := arr.Values()
	killed, notFound := bson.A{}, bson.A{}
	for _, iv := range vals {
		id, ok := iv.Int64OK()
		if !ok {
			return nil, typeMismatch(r.name, "cursors", iv, "long")
		}
		if s.killCursor(id) {
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}

// cmdCount: {count: "c", query, skip, limit} -> {n}.
func (s *Server) cmdCount(_ context.Context, _ *conn, r *request) (bson.D, error) {
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
	n, err := s.store.Count(ns, q, skip, limit)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

// cmdDistinct: {distinct: "c", key, query} -> {values}.
func (s *Server) cmdDistinct(_ context.Context, _ *conn, r *request) (bson.D, error) {
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
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'distinct.key' is missing but a required field")
	}
	vals, err := s.store.Distinct(ns, key, q)
	if err != nil {
		return nil, err
	}
	out := make(bson.A, len(vals))
	for i, v := range vals {
		out[i] = v
	}
	return bson.D{{Key: "values", Value: out}}, nil
}

// cmdAggregate: {aggregate: "c" | 1, pipeline, cursor: {batchSize}} ->
// {cursor: {firstBatch, id, ns}}. A pipeline whose first stage is
// $changeStream goes to the change-stream engine.
func (s *Server) cmdAggregate(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	var ns store.Namespace
	cursorNS := r.db + ".$cmd.aggregate"
	switch v := r.cmd.Index(0).Value(); v.Type {
	case bson.TypeString:
		var err error
		if ns, err = collNS(r); err != nil {
			return nil, err
		}
		cursorNS = ns.String()
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		if n, _ := v.AsFloat64OK(); n != 1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Invalid command format: the 'aggregate' field must specify a collection name or 1")
		}
		ns = store.Namespace{DB: r.db}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Invalid command format: the 'aggregate' field must specify a collection name or 1")
	}
	a := newArgs(r)
	stages := a.docs("pipeline")
	explain := a.bool("explain")
	if a.err != nil {
		return nil, a.err
	}
	if _, err := r.cmd.LookupErr("pipeline"); err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'aggregate.pipeline' is missing but a required field")
	}
	if explain {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "explain is not supported by this server")
	}
	if _, err := r.cmd.LookupErr("cursor"); err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	batch, err := cursorArg(r)
	if err != nil {
		return nil, err
	}
	if len(stages) > 0 {
		if first, err := stages[0].IndexErr(0); err == nil && first.Key() == "$changeStream" {
			return s.aggregateChangeStream(ctx, r, ns.Coll, cursorNS, batch)
		}
	}
	docs, err := s.store.Aggregate(ns, stages)
	if err != nil {
		return nil, err
	}
	return s.openCursor(ctx, cursorNS, &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
}

func (s *Server) aggregateChangeStream(ctx context.Context, r *request, coll, cursorNS string, batch int64) (bson.D, error) {
	if s.openChangeStream == nil {
		return nil, mongoerr.New(mongoerr.CommandNotSupported, "change streams are not supported yet")
	}
	src, extra, err := s.openChangeStream(ctx, r.db, coll, r.cmd)
	if err != nil {
		return nil, err
	}
	reply, err := s.openCursor(ctx, cursorNS, src, cursorOptions{batchSize: batch, tailable: true, awaitData: true})
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 { // first-reply extras go before id and ns
		cur := reply[0].Value.(bson.D)
		out := append(bson.D{cur[0]}, extra...)
		reply[0].Value = append(out, cur[1:]...)
	}
	return reply, nil
}
