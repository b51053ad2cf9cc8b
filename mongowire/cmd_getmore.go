package mongowire

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

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
		return nil, missingField("getMore.collection")
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
	if err := s.checkCursorOwner(ctx, cur); err != nil {
		s.checkin(cur, false)
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
