package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdDelete: {delete: "c", deletes: [{q, limit}], ordered} -> {n, writeErrors?}.
func (s *Server) cmdDelete(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	stmts, ordered, err := writeBatch(r, "deletes")
	if err != nil {
		return nil, err
	}
	// The statements are parsed before any runs: a malformed one fails
	// the whole command, as mongod's IDL parser does.
	type deleteStmt struct {
		q         bson.Raw
		limit     int
		collation bson.RawValue
	}
	let, err := commandLet(r)
	if err != nil {
		return nil, err
	}
	parsed := make([]deleteStmt, len(stmts))
	for i, stmt := range stmts {
		if err := deleteStatementFields.check("delete.deletes", stmt, false); err != nil {
			return nil, err
		}
		a := &args{name: "delete.deletes", cmd: stmt}
		q := a.doc("q")
		limit, hasLimit := a.int64("limit")
		switch {
		case a.err != nil:
			return nil, a.err
		case q == nil:
			return nil, missingField("delete.deletes.q")
		case !hasLimit:
			return nil, missingField("delete.deletes.limit")
		case limit != 0 && limit != 1:
			return nil, mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %d", limit)
		}
		if q, err = letFilter(q, let); err != nil {
			return nil, err
		}
		parsed[i] = deleteStmt{q: q, limit: int(limit), collation: collationArg(stmt)}
	}
	var (
		n         int
		writeErrs bson.A
	)
	for i, st := range parsed {
		k, err := 0, s.statementHint(ns, stmts[i])
		if err == nil {
			k, err = s.data(ctx).DeleteWith(ns, store.DeleteSpec{Filter: st.q, Limit: st.limit, Collation: st.collation})
		}
		if err == nil {
			n += k
			continue
		}
		writeErrs = append(writeErrs, writeErrorDoc(i, asMongoErr(err)))
		if ordered {
			break
		}
	}
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(writeErrs) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrs})
	}
	return reply, nil
}
