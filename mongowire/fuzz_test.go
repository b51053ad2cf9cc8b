package mongowire

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/wire"
)

// FuzzCommands runs arbitrary (structurally valid) command documents
// through dispatch: every one must get a reply, and none may fail with
// InternalError, which is how a handler panic or an error that is not a
// MongoDB error reaches clients. Seeds are commands drivers and mongosh
// send, and their hostile variants.
func FuzzCommands(f *testing.F) {
	seeds := []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2}}}}}},
		{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}}, {Key: "sort", Value: bson.D{{Key: "a", Value: -1}}}, {Key: "projection", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "batchSize", Value: 1}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: 3}}}}}, {Key: "multi", Value: true}}}}},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: "$a"}}}}}}, {Key: "upsert", Value: true}}}}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}}}}},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "update", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "new", Value: true}, {Key: "upsert", Value: true}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "localField", Value: "a"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "j"}}}}, bson.D{{Key: "$unwind", Value: "$j"}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "o"}}}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "count", Value: "c"}, {Key: "query", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "skip", Value: 1}},
		{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}},
		{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a_1"}, {Key: "unique", Value: true}}}}},
		{{Key: "dropIndexes", Value: "c"}, {Key: "index", Value: "*"}},
		{{Key: "listIndexes", Value: "c"}},
		{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: "c"}}}},
		{{Key: "create", Value: "d"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}},
		{{Key: "collMod", Value: "d"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: false}}}},
		{{Key: "getMore", Value: int64(1)}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: int64(1) << 40}},
		{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{int64(1)}}},
		{{Key: "explain", Value: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}}}},
		{{Key: "collStats", Value: "c"}, {Key: "scale", Value: 0}},
		{{Key: "drop", Value: "d"}},
		{{Key: "hello", Value: 1}},
		{{Key: "dbStats", Value: 1}},
		{{Key: "usersInfo", Value: bson.A{"u", bson.D{{Key: "user", Value: "u"}, {Key: "db", Value: "fz"}}}}, {Key: "showPrivileges", Value: true}},
		{{Key: "rolesInfo", Value: 1}, {Key: "showBuiltinRoles", Value: true}, {Key: "showPrivileges", Value: true}},
		{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}},
		{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"}, {Key: "payload", Value: bson.Binary{Data: []byte("n,,n=u,r=abc")}}},
		{{Key: "grantRolesToUser", Value: "u"}, {Key: "roles", Value: bson.A{"read", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "x"}}}}},
	}
	for _, sd := range seeds {
		b, err := bson.Marshal(append(sd, bson.E{Key: "$db", Value: "fz"}))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := New(Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), CursorTimeout: time.Minute})
	if err := s.Start(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	c := &conn{s: s, log: s.log}
	f.Fuzz(func(t *testing.T, cmd []byte) {
		if wire.CheckDocument(cmd, wire.MaxCommandDepth) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		reply, err := s.dispatch(ctx, c, bson.Raw(cmd))
		if err != nil {
			return // a fail point closing the connection
		}
		r := bson.Raw(reply)
		if code, ok := r.Lookup("code").Int32OK(); ok && code == mongoerr.InternalError {
			t.Fatalf("command %v: internal error %v", bson.Raw(cmd), r)
		}
	})
}
