package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// cmdDrop: {drop: "c"} -> {nIndexesWas, ns}; a missing collection is not
// an error, as in MongoDB 7.0.
func (s *Server) cmdDrop(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	n, err := s.data(ctx).Drop(ns)
	if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.NamespaceNotFound {
		// Since 7.0, dropping a missing collection succeeds.
		return bson.D{{Key: "ns", Value: ns.String()}}, nil
	}
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(n)}, {Key: "ns", Value: ns.String()}}, nil
}
