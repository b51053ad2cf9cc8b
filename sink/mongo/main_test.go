package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveTideBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// change is a test's description of one event: op on ns of document
// {_id: id, n: n}; n < 0 leaves the full document out.
type change struct {
	op cdc.Op
	ns string
	id any
	n  int
}

// record makes the i-th record of a test: position {"t":i}.
func record(i int, c change) cdc.Record {
	ev := cdc.Event{
		Pos: cdc.Position(fmt.Sprintf(`{"t":%d}`, i)), Op: c.op, Namespace: c.ns,
		ClusterTime: cdc.Timestamp{T: 1700000000, I: uint32(i + 1)}, WallTimeMS: 1700000000000 + int64(i),
	}
	if c.id != nil {
		ev.DocumentKey = marshal(bson.D{{Key: "_id", Value: c.id}})
		if c.n >= 0 && c.op != cdc.OpDelete {
			ev.FullDocument = marshal(bson.D{{Key: "_id", Value: c.id}, {Key: "n", Value: c.n}})
		}
	}
	data, err := encode.Envelope(nil, &ev)
	if err != nil {
		panic(err)
	}
	return cdc.Record{Event: ev, Data: data}
}

func records(from int, cs ...change) []cdc.Record {
	out := make([]cdc.Record, len(cs))
	for i, c := range cs {
		out[i] = record(from+i, c)
	}
	return out
}

func marshal(v any) []byte {
	b, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// docs returns the documents of db.coll, whose _ids are integers, as
// _id -> their n field (-1 if missing).
func docs(t testing.TB, c *mongo.Client, db, coll string) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur, err := c.Database(db).Collection(coll).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatalf("find in %s.%s: %v", db, coll, err)
	}
	defer cur.Close(ctx)
	out := map[int64]int{}
	for cur.Next(ctx) {
		n := -1
		if v, ok := cur.Current.Lookup("n").AsInt64OK(); ok {
			n = int(v)
		}
		id, ok := cur.Current.Lookup("_id").AsInt64OK()
		if !ok {
			t.Fatalf("%s.%s: _id %s is not an integer", db, coll, cur.Current.Lookup("_id"))
		}
		out[id] = n
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t testing.TB, c *mongo.Client, db, coll string) int64 {
	t.Helper()
	n, err := c.Database(db).Collection(coll).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		t.Fatalf("count %s.%s: %v", db, coll, err)
	}
	return n
}

func mongoIndex(keys bson.D) mongo.IndexModel {
	return mongo.IndexModel{Keys: keys, Options: options.Index().SetUnique(true)}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func majorityJournaled() *writeconcern.WriteConcern {
	j := true
	return &writeconcern.WriteConcern{W: "majority", Journal: &j}
}
