package testenv

import (
	"context"
	"log/slog"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// MongoWire starts Tide's embedded MongoDB-compatible server on a free
// loopback port, in memory unless an option sets DataDir, and closes it
// when the test ends. Options adjust the configuration before start.
func MongoWire(t testing.TB, opts ...func(*mongowire.Config)) *mongowire.Server {
	t.Helper()
	cfg := mongowire.Config{
		Addr:   "127.0.0.1:0",
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	s := mongowire.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatalf("start mongowire server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close mongowire server: %v", err)
		}
	})
	return s
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
