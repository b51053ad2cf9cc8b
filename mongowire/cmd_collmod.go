package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdCollMod: {collMod: "c", changeStreamPreAndPostImages: {enabled}, ...} -> {}.
func (s *Server) cmdCollMod(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	if err := s.store.CollMod(ns, fieldsExcept(r.cmd)); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}
