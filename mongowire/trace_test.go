package mongowire

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With a tracer, each command is a server span named after it, with its
// database; a command that fails is an error span.
func TestTraceCommands(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	s := startServer(t, func(c *Config) { c.Tracer = tp.Tracer("test") })
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("shop").Collection("orders")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err == nil {
		t.Fatal("a duplicate _id was inserted")
	}
	err = c.Database("shop").RunCommand(t.Context(), bson.D{{Key: "noSuchCommand", Value: 1}}).Err()
	if err == nil {
		t.Fatal("an unknown command succeeded")
	}
	var inserts, failed, unknown int
	for _, sp := range exp.GetSpans() {
		db := ""
		for _, a := range sp.Attributes {
			if a.Key == "db.namespace" {
				db = a.Value.AsString()
			}
		}
		switch sp.Name {
		case "insert":
			inserts++
			if db != "shop" {
				t.Errorf("insert span's db.namespace %q, want shop", db)
			}
			if sp.Status.Code == codes.Error {
				failed++
			}
		case "noSuchCommand":
			unknown++
			if sp.Status.Code != codes.Error {
				t.Errorf("unknown command's span status %v, want an error", sp.Status)
			}
		}
	}
	// A duplicate key is a write error in an ok: 1 reply: the command
	// itself succeeded.
	if inserts != 2 || failed != 0 || unknown != 1 {
		t.Errorf("%d insert spans (%d failed), %d for the unknown command; want 2 (0), 1", inserts, failed, unknown)
	}
}
