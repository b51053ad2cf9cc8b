package mongowiretest_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/mongowiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartTest is what another module's test does: start a server with
// StartTest, connect the official driver with its URI, and watch a change
// stream.
func TestStartTest(t *testing.T) {
	srv := mongowiretest.StartTest(t)
	if !strings.HasPrefix(srv.URI(), "mongodb://127.0.0.1:") || !strings.HasSuffix(srv.URI(), "/?replicaSet=rs0") {
		t.Fatalf("URI = %q, want mongodb://127.0.0.1:<port>/?replicaSet=rs0", srv.URI())
	}
	client := testenv.MongoClient(t, srv.URI())
	ctx := t.Context()

	var hello struct {
		SetName string `bson:"setName"`
		Primary string `bson:"primary"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.SetName != "rs0" || hello.Primary != srv.Addr() {
		t.Errorf("hello: setName %q, primary %q; want rs0, %s", hello.SetName, hello.Primary, srv.Addr())
	}

	coll := client.Database("test").Collection("c")
	stream, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer stream.Close(t.Context())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if !stream.Next(ctx) {
		t.Fatalf("change stream: %v", stream.Err())
	}
	if op := stream.Current.Lookup("operationType").StringValue(); op != "insert" {
		t.Errorf("operationType = %q, want insert", op)
	}
}

// TestStartTestWith passes options through: test commands are enabled.
func TestStartTestWith(t *testing.T) {
	srv := mongowiretest.StartTestWith(t, mongowire.Config{EnableTestCommands: true})
	client := testenv.MongoClient(t, srv.URI())
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
	if err := client.Database("admin").RunCommand(t.Context(), cmd).Err(); err != nil {
		t.Errorf("configureFailPoint with EnableTestCommands: %v", err)
	}

	plain := testenv.MongoClient(t, mongowiretest.StartTest(t).URI())
	if err := plain.Database("admin").RunCommand(t.Context(), cmd).Err(); err == nil {
		t.Error("configureFailPoint without EnableTestCommands succeeded, want an error")
	}
}
