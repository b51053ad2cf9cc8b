package mongo_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
)

// TestContract runs the conformance suite in both modes, with the sink
// keeping the checkpoint (its Checkpoints is the suite's store) and
// without. Each subtest gets a server of its own.
func TestContract(t *testing.T) {
	for _, mode := range []string{mongosink.ModeAppend, mongosink.ModeMirror} {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keeps_checkpoint=%v", mode, keep), func(t *testing.T) {
				testContract(t, mode, keep)
			})
		}
	}
}

func testContract(t *testing.T, mode string, keep bool) {
	var mu sync.Mutex
	servers := map[string]*mongowire.Server{}
	clients := map[string]*mongo.Client{}
	server := func(t *testing.T) (*mongowire.Server, *mongo.Client) {
		mu.Lock()
		defer mu.Unlock()
		if servers[t.Name()] == nil {
			servers[t.Name()] = testenv.MongoWire(t)
			clients[t.Name()] = testenv.MongoClient(t, servers[t.Name()].URI())
		}
		return servers[t.Name()], clients[t.Name()]
	}
	h := cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink {
			srv, _ := server(t)
			return mongosink.New(mongosink.Config{URI: srv.URI(), Database: "target", Collection: "cdctest", Mode: mode,
				Pipeline: cdctest.Pipeline, Logger: testLogger(t)})
		},
		Committed: func(t *testing.T) [][]byte {
			_, c := server(t)
			sort, field := bson.D{{Key: "_cluster_time", Value: 1}}, []string{"_full_document", "text"}
			if mode == mongosink.ModeMirror {
				sort, field = bson.D{{Key: "_id", Value: 1}}, []string{"text"}
			}
			cur, err := c.Database("target").Collection("cdctest").Find(t.Context(), bson.D{}, options.Find().SetSort(sort))
			if err != nil {
				t.Fatal(err)
			}
			defer cur.Close(t.Context())
			var out [][]byte
			for cur.Next(t.Context()) {
				out = append(out, []byte(cur.Current.Lookup(field...).StringValue()))
			}
			if err := cur.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
		Record: contractRecord,
		Want:   func(i int) []byte { return []byte("record " + strconv.Itoa(i)) },
		FailOpen: func(t *testing.T) cdc.Sink {
			return mongosink.New(mongosink.Config{URI: "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200", Pipeline: cdctest.Pipeline})
		},
	}
	if keep {
		h.Checkpoints = func(t *testing.T, s cdc.Sink) cdctest.Store { return s.(*mongosink.Sink).Checkpoints() }
	}
	cdctest.TestSink(t, h)
}

// contractRecord is the suite's record i as a MongoDB insert of
// {_id: i, text: "record i"}, encoded as the pipeline encodes it.
func contractRecord(i int) cdc.Record {
	ev := cdc.Event{
		Pos: cdctest.DefaultRecord(i).Pos, Op: cdc.OpInsert, Namespace: "db.items",
		ClusterTime:  cdc.Timestamp{T: 1700000000, I: uint32(i + 1)},
		DocumentKey:  marshal(bson.D{{Key: "_id", Value: i}}),
		FullDocument: marshal(bson.D{{Key: "_id", Value: i}, {Key: "text", Value: "record " + strconv.Itoa(i)}}),
	}
	data, err := encode.Envelope(nil, &ev)
	if err != nil {
		panic(err)
	}
	return cdc.Record{Event: ev, Data: data}
}
