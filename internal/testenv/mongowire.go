package testenv

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/mongowiretest"
)

// MongoWire starts Tide's embedded MongoDB-compatible server with
// mongowiretest.StartTestWith: on a free loopback port, in memory unless an
// option sets DataDir, closed when the test ends. Options adjust the
// configuration before start.
func MongoWire(t testing.TB, opts ...func(*mongowire.Config)) *mongowire.Server {
	t.Helper()
	var cfg mongowire.Config
	for _, o := range opts {
		o(&cfg)
	}
	return mongowiretest.StartTestWith(t, cfg)
}

// MongoClient connects the official driver to uri and disconnects when
// the test ends (with context.Background: t.Context is already cancelled
// when cleanups run).
func MongoClient(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("connect to %s: %v", uri, err)
	}
	t.Cleanup(func() {
		if err := c.Disconnect(context.Background()); err != nil {
			t.Errorf("disconnect from %s: %v", uri, err)
		}
	})
	return c
}
