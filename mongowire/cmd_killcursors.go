package mongowire

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdKillCursors: {killCursors: "c", cursors: [ids]} ->
// {cursorsKilled, cursorsNotFound, cursorsAlive, cursorsUnknown}.
func (s *Server) cmdKillCursors(ctx context.Context, c *conn, r *request) (bson.D, error) {
	v, err := r.cmd.LookupErr("cursors")
	if err != nil {
		return nil, missingField("killCursors.cursors")
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(r.name, "cursors", v, "array")
	}
	vals, _ := arr.Values()
	killed, notFound := bson.A{}, bson.A{}
	for _, iv := range vals {
		id, ok := iv.Int64OK()
		if !ok {
			return nil, typeMismatch(r.name, "cursors", iv, "long")
		}
		if err := s.mayKillCursor(ctx, c, r, id); err != nil {
			return nil, err
		}
		if s.killCursor(id) {
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}

// mayKillCursor refuses, with auth on, to kill another user's cursor
// without the killAnyCursor action on its collection.
func (s *Server) mayKillCursor(ctx context.Context, c *conn, r *request, id int64) error {
	if !s.cfg.Auth {
		return nil
	}
	owner, ns, ok := s.cursorOwnerOf(id)
	if !ok || owner == cursorOwner(ctx) {
		return nil
	}
	db, coll, _ := strings.Cut(ns, ".")
	if s.privilegesOf(c).on(actKillAnyCursor, db, coll) {
		return nil
	}
	return unauthorized(r)
}
