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

// TestContractMulti runs the conformance suite against a source of many
// collections: each subtest has a database of its own, captured with
// ["*"] through a database-level stream, and writes round-robin into
// three of its collections.
func TestContractMulti(t *testing.T) {
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())

	type upstream struct {
		db   string
		next int
	}
	var mu sync.Mutex
	upstreams := map[string]*upstream{}
	of := func(t *testing.T) *upstream {
		mu.Lock()
		defer mu.Unlock()
		u := upstreams[t.Name()]
		if u == nil {
			u = &upstream{db: fmt.Sprintf("multi%d", len(upstreams)+1)}
			for _, c := range []string{"a", "b", "c"} {
				if err := client.Database(u.db).CreateCollection(context.Background(), c); err != nil {
					t.Fatalf("create collection: %v", err)
				}
			}
			upstreams[t.Name()] = u
		}
		return u
	}
	cdctest.TestSource(t, cdctest.SourceHarness{
		New: func(t *testing.T) cdc.Source {
			return mongosource.New(mongosource.Config{
				URI: srv.URI(), Database: of(t).db, Collections: []string{"*"},
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
				coll := client.Database(u.db).Collection([]string{"a", "b", "c"}[id%3])
				if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "n", Value: id}}); err != nil {
					t.Fatalf("insert %d: %v", id, err)
				}
			}
		},
	})
}
