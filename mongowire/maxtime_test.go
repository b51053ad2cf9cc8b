package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire"
)

// maxTimeMS is parsed as mongod parses it, and a command whose limit
// passes while a fail point blocks it fails with 50 MaxTimeMSExpired.
func TestMaxTimeMS(t *testing.T) {
	t.Parallel()
	_, client := setup(t, func(c *mongowire.Config) { c.EnableTestCommands = true })
	db := client.Database("mt")
	find := func(maxTime any) error {
		return db.RunCommand(t.Context(), bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: maxTime}}).Err()
	}
	for _, ok := range []any{int32(0), int64(1000), 1000.0} {
		if err := find(ok); err != nil {
			t.Errorf("maxTimeMS %v: %v", ok, err)
		}
	}
	wantCode(t, find("x"), 2, "maxTimeMS must be a number")
	wantCode(t, find(int32(-1)), 2, "maxTimeMS out of range")
	wantCode(t, find(int64(1)<<40), 2, "maxTimeMS out of range")
	wantCode(t, find(1.5), 2, "maxTimeMS has non-integral value")

	run(t, client.Database("admin"), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 60}}}})
	wantCode(t, find(int32(20)), 50, "operation exceeded time limit")
	if err := find(int32(5000)); err != nil {
		t.Errorf("a limit longer than the block: %v", err)
	}
}
