package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdDropDatabase: {dropDatabase: 1} -> {dropped: "db"}.
func (s *Server) cmdDropDatabase(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	if err := s.data(ctx).DropDatabase(r.db); err != nil {
		return nil, err
	}
	return bson.D{{Key: "dropped", Value: r.db}}, nil
}
