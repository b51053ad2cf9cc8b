package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdFindAndModify: {findAndModify: "c", query, sort, remove, update, new,
// fields, upsert, arrayFilters} -> {lastErrorObject: {n, updatedExisting,
// upserted?}, value}.
func (s *Server) cmdFindAndModify(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	spec := store.FindAndModifySpec{
		Filter:       a.doc("query"),
		Sort:         a.doc("sort"),
		Fields:       a.doc("fields"),
		Remove:       a.bool("remove"),
		New:          a.bool("new"),
		Upsert:       a.bool("upsert"),
		ArrayFilters: a.docs("arrayFilters"),

		BypassValidation: a.bool("bypassDocumentValidation"),
		Collation:        collationArg(r.cmd),
	}
	if a.err != nil {
		return nil, a.err
	}
	u, hasUpdate := a.lookup("update")
	switch {
	case spec.Remove && hasUpdate:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both an update and remove=true")
	case !spec.Remove && !hasUpdate:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Either an update or remove=true must be specified")
	case spec.Remove && spec.New:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	case spec.Remove && spec.Upsert:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both upsert=true and remove=true")
	case hasUpdate && u.Type != bson.TypeEmbeddedDocument && u.Type != bson.TypeArray:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
	}
	spec.Update = u
	if err := letFindAndModify(r, &spec); err != nil {
		return nil, err
	}
	res, err := s.data(ctx).FindAndModify(ns, spec)
	if err != nil {
		return nil, err
	}
	leo := bson.D{{Key: "n", Value: int32(res.N)}}
	if !spec.Remove {
		leo = append(leo, bson.E{Key: "updatedExisting", Value: res.UpdatedExisting})
		if res.Upserted.Type != 0 {
			leo = append(leo, bson.E{Key: "upserted", Value: res.Upserted})
		}
	}
	var value any // nil encodes as null
	if res.Value != nil {
		value = res.Value
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: value}}, nil
}
