package mongo_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/internal/testenv"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// TestContract runs the conformance suite against the embedded server,
// through the official driver, with a collection of its own for each
// subtest. A source is an Identifier (the collection's UUID, the replica
// set), so the suite also checks that a checkpoint of another identity is
// refused.
func TestContract(t *testing.T) {
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	db := client.Database("cdctest")

	type upstream struct {
		coll string
		next int // _id of the next document
	}
	var mu sync.Mutex
	upstreams := map[string]*upstream{}
	of := func(t *testing.T) *upstream {
		mu.Lock()
		defer mu.Unlock()
		u := upstreams[t.Name()]
		if u == nil {
			u = &upstream{coll: fmt.Sprintf("c%d", len(upstreams)+1)}
			if err := db.CreateCollection(context.Background(), u.coll); err != nil {
				t.Fatalf("create collection: %v", err)
			}
			upstreams[t.Name()] = u
		}
		return u
	}
	cdctest.TestSource(t, cdctest.SourceHarness{
		New: func(t *testing.T) cdc.Source {
			return mongosource.New(mongosource.Config{
				URI: srv.URI(), Database: "cdctest", Collection: of(t).coll,
				Snapshot: "never", MaxAwait: 100 * time.Millisecond,
				BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, ConnectTimeout: 3 * time.Second,
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
		},
		Produce: func(t *testing.T, n int) {
			u := of(t)
			for range n {
				mu.Lock()
				id := u.next
				u.next++
				mu.Unlock()
				if _, err := db.Collection(u.coll).InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "n", Value: id}}); err != nil {
					t.Fatalf("insert %d: %v", id, err)
				}
			}
		},
	})
}
