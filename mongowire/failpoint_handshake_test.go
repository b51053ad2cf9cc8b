package mongowire_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// failCommand on hello fails the handshake of new connections of the
// named application only (the SDAM backpressure spec tests rely on it),
// and a handshake error is answered, not dropped.
func TestFailCommandOnHandshake(t *testing.T) {
	t.Parallel()
	s, admin := setup(t, func(c *mongowire.Config) { c.EnableTestCommands = true })
	connect := func(app string) error {
		c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetAppName(app).
			SetServerSelectionTimeout(500 * time.Millisecond).SetRetryReads(false))
		if err != nil {
			return err
		}
		defer c.Disconnect(t.Context())
		return c.Ping(t.Context(), nil)
	}
	fail := func(data bson.D) {
		t.Helper()
		run(t, admin.Database("admin"), bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: data}})
	}
	fail(bson.D{{Key: "failCommands", Value: bson.A{"hello", "isMaster"}}, {Key: "appName", Value: "blocked"}, {Key: "closeConnection", Value: true}})
	if err := connect("blocked"); err == nil {
		t.Fatal("the handshake of application blocked succeeded under closeConnection")
	}
	if err := connect("other"); err != nil {
		t.Fatalf("another application: %v", err)
	}
	fail(bson.D{{Key: "failCommands", Value: bson.A{"hello", "isMaster"}}, {Key: "appName", Value: "blocked"}, {Key: "errorCode", Value: 91}})
	if err := connect("blocked"); err == nil {
		t.Fatal("the handshake of application blocked succeeded under errorCode 91")
	}
	run(t, admin.Database("admin"), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	if err := connect("blocked"); err != nil {
		t.Fatalf("after the fail point is off: %v", err)
	}
}
