package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// TestServerLifecycle checks what New, Start and Close promise: Close
// before Start and twice is fine, and a server starts once.
func TestServerLifecycle(t *testing.T) {
	never := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"})
	if err := never.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
	if err := never.Start(); err == nil {
		t.Error("Start after Close succeeded, want an error")
	}

	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Ping(t.Context(), nil); err != nil {
		t.Errorf("ping: %v", err)
	}
	if err := client.Disconnect(t.Context()); err != nil {
		t.Errorf("disconnect: %v", err)
	}
	for i := range 2 {
		if err := srv.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}
