package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

// cmdDelete: {delete: "c", deletes: [{q, limit}], ordered} -> {n, writeErrors?}.
func (s *Server) cmdDelete(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	stmts, ordered, err := writeBatch(r, "deletes")
	if err != nil {
		return nil, err
	}
	var (
		n         int
		writeErrs bson.A
	)
	for i, stmt := range stmts {
		a := &args{name: "delete.deletes", cmd: stmt}
		q := a.doc("q")
		limit, hasLimit := a.int64("limit")
		err := a.err
		switch {
		case err != nil:
		case q == nil:
			err = mongoerr.New(mongoerr.FailedToParse, "BSON field 'delete.deletes.q' is missing but a required field")
		case !hasLimit:
			err = mongoerr.New(mongoerr.FailedToParse, "BSON field 'delete.deletes.limit' is missing but a required field")
		case limit != 0 && limit != 1:
			err = mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %d", limit)
		default:
			var k int
			if k, err = s.store.Delete(ns, q, int(limit)); err == nil {
				n += k
				continue
			}
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
