package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmdKillCursors: {killCursors: "c", cursors: [ids]} ->
// {cursorsKilled, cursorsNotFound, cursorsAlive, cursorsUnknown}.
func (s *Server) cmdKillCursors(_ context.Context, _ *conn, r *request) (bson.D, error) {
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
