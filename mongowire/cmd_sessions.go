package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdEndSessions forgets the sessions' retryable-write records.
func (s *Server) cmdEndSessions(_ context.Context, _ *conn, r *request) (bson.D, error) {
	if arr, ok := r.cmd.Index(0).Value().ArrayOK(); ok {
		s.sessions.end(arr)
		s.txns.abortSessions(arr, false)
	}
	return bson.D{}, nil
}

func (s *Server) cmdKillSessions(ctx context.Context, c *conn, r *request) (bson.D, error) {
	return s.cmdEndSessions(ctx, c, r)
}

func (s *Server) cmdKillAllSessions(context.Context, *conn, *request) (bson.D, error) {
	s.sessions.clear()
	s.txns.abortSessions(nil, true)
	return bson.D{}, nil
}
