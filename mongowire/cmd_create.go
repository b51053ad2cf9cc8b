package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdCreate: {create: "c", ...options} -> {}. The options other than the
// generic command fields go to the store as given.
func (s *Server) cmdCreate(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	if err := s.store.Create(ns, fieldsExcept(r.cmd)); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}
