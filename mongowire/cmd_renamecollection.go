package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// cmdRenameCollection: {renameCollection: "db.a", to: "db.b", dropTarget} on admin.
func (s *Server) cmdRenameCollection(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	fromS, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok {
		return nil, typeMismatch(r.name, "renameCollection", r.cmd.Index(0).Value(), "string")
	}
	toS, ok := a.string("to")
	if a.err != nil {
		return nil, a.err
	}
	if !ok {
		return nil, missingField("renameCollection.to")
	}
	dropTarget := a.bool("dropTarget")
	if a.err != nil {
		return nil, a.err
	}
	from, err := parseNS(r.name, "source", fromS)
	if err != nil {
		return nil, err
	}
	to, err := parseNS(r.name, "target", toS)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	if err := s.data(ctx).Rename(from, to, dropTarget); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}
