package mongowire_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// A failCommand writeConcernError on a retryable write carries
// RetryableWriteError, so the driver retries it; onPrimaryTransactionalWrite
// fails a retryable write before it applies, or applies it and drops the
// connection, and the driver's retry finds the right outcome either way.
func TestRetryableWriteFailPoints(t *testing.T) {
	s := testenv.MongoWire(t, func(cfg *mongowire.Config) { cfg.EnableTestCommands = true })
	var inserts atomic.Int32
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "insert" {
			inserts.Add(1)
		}
	}}
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	ctx := t.Context()
	admin := c.Database("admin")
	coll := c.Database("fpw").Collection("c")
	fail := func(point string, data bson.D) {
		t.Helper()
		cmd := bson.D{{Key: "configureFailPoint", Value: point}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}}}
		if data != nil {
			cmd = append(cmd, bson.E{Key: "data", Value: data})
		}
		run(t, admin, cmd)
	}
	count := func(id string) int64 {
		t.Helper()
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, tc := range map[string]struct {
		point string
		data  bson.D
	}{
		"writeConcernError": {"failCommand", bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "Replication is being shut down"}}}}},
		"failBeforeCommitExceptionCode": {"onPrimaryTransactionalWrite", bson.D{{Key: "failBeforeCommitExceptionCode", Value: 91}}},
		"closeConnection":               {"onPrimaryTransactionalWrite", bson.D{{Key: "closeConnection", Value: true}}},
		// mongod's fail point closes the connection unless told not to,
		// after a failure before the commit too (a non-retryable code).
		"no data":                 {"onPrimaryTransactionalWrite", nil},
		"failBeforeCommit closes": {"onPrimaryTransactionalWrite", bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			inserts.Store(0)
			fail(tc.point, tc.data)
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: name}}); err != nil {
				t.Fatalf("insert = %v, want the retry to succeed", err)
			}
			if n := inserts.Load(); n != 2 {
				t.Fatalf("%d insert attempts, want 2", n)
			}
			if n := count(name); n != 1 {
				t.Fatalf("%d documents, want 1", n)
			}
		})
	}
	// closeConnection: false: the failure is the reply, unapplied.
	fail("onPrimaryTransactionalWrite", bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}, {Key: "closeConnection", Value: false}})
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "kept open"}}); err == nil || !strings.Contains(err.Error(), "Failing write for test due to failpoint") {
		t.Fatalf("insert under failBeforeCommitExceptionCode 1 without closing = %v, want the injected error", err)
	}
	if n := count("kept open"); n != 0 {
		t.Fatalf("%d documents after a write failed before its commit, want 0", n)
	}
	// Without a txnNumber (retryWrites off) the write concern error is
	// the driver's error to return, and carries no retry label.
	nc, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetRetryWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Disconnect(context.Background())
	fail("failCommand", bson.D{{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 91}, {Key: "errmsg", Value: "Replication is being shut down"}}}})
	_, err = nc.Database("fpw").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "plain"}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.HasErrorLabel("RetryableWriteError") {
		t.Fatalf("insert without retries = %v, want a write concern error without RetryableWriteError", err)
	}
}
