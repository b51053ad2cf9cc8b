package mongo_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
)

// keeper returns a sink that keeps the checkpoint, loaded and opened.
func keeper(t *testing.T, uri string, cfg mongosink.Config) (*mongosink.Sink, *cdc.Checkpoint) {
	t.Helper()
	cfg.URI = uri
	if cfg.Pipeline == "" {
		cfg.Pipeline = "p"
	}
	cfg.Logger = testLogger(t)
	s := mongosink.New(cfg)
	t.Cleanup(func() { s.Close() })
	cp, err := s.Checkpoints().Load(t.Context(), cfg.Pipeline)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := s.Open(t.Context(), cp); err != nil {
		t.Fatalf("open: %v", err)
	}
	return s, cp
}

// checkpointOf reads what the sink committed as pipeline's checkpoint.
func checkpointOf(t *testing.T, uri, pipeline string) *cdc.Checkpoint {
	t.Helper()
	cp, err := mongosink.ReadCheckpoint(t.Context(), mongosink.Config{URI: uri, Pipeline: pipeline})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestSplitTransactions: a batch larger than a transaction may hold is
// written in several, each with the checkpoint of its last record.
func TestSplitTransactions(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	s, cp := keeper(t, srv.URI(), mongosink.Config{MaxTransactionWrites: 3})
	if cp != nil {
		t.Fatalf("fresh checkpoint %+v, want none", cp)
	}
	var cs []change
	for i := range 10 {
		cs = append(cs, change{cdc.OpInsert, "shop.orders", i, i})
	}
	batch := records(0, cs...)
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	next := cdc.Checkpoint{Source: cdc.Position(`{"t":"end"}`), Meta: map[string]string{"k": "v"}}
	if err := s.Commit(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoints().Save(t.Context(), "p", next); err != nil {
		t.Fatalf("save: %v", err)
	}
	if n := s.Stats().Transactions; n != 4 {
		t.Errorf("%d transactions, want 4 (3+3+3+1)", n)
	}
	if n := count(t, c, "shop", "orders"); n != 10 {
		t.Errorf("shop.orders holds %d documents, want 10", n)
	}
	if got := checkpointOf(t, srv.URI(), "p"); string(got.Source) != `{"t":"end"}` || got.Meta["k"] != "v" {
		t.Errorf("checkpoint %+v, want the batch's", got)
	}
	// Saving a checkpoint no transaction wrote is refused.
	if err := s.Checkpoints().Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(`{"t":"other"}`)}); err == nil {
		t.Error("Save of a checkpoint the sink did not commit succeeded")
	}
}

// TestTakeOver: a second sink of the same pipeline takes it over, and
// the first fails at its next commit, writing nothing.
func TestTakeOver(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	first, _ := keeper(t, srv.URI(), mongosink.Config{})
	commit(t, first, records(0, change{cdc.OpInsert, "shop.orders", 1, 1}))
	second, cp := keeper(t, srv.URI(), mongosink.Config{})
	if cp == nil || string(cp.Source) != `{"t":0}` {
		t.Fatalf("second sink loaded %+v, want the first one's checkpoint", cp)
	}
	if err := first.Put(t.Context(), records(1, change{cdc.OpInsert, "shop.orders", 2, 2})); err != nil {
		t.Fatal(err)
	}
	err := first.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"t":1}`)})
	if err == nil || !strings.Contains(err.Error(), "another tide took over the pipeline") {
		t.Fatalf("first sink's Commit after a takeover = %v, want it refused", err)
	}
	commit(t, second, records(1, change{cdc.OpInsert, "shop.orders", 3, 3}))
	if got := docs(t, c, "shop", "orders"); !maps.Equal(got, map[int64]int{1: 1, 3: 3}) {
		t.Errorf("shop.orders = %v, want the second sink's writes only", got)
	}
}

// TestTakeOverEndsAbandonedTransaction: the transaction a killed tide
// left open (here: one never committed) holds the checkpoint document;
// a new sink kills its session instead of waiting for the server's
// transaction lifetime limit, and what it held is rolled back.
func TestTakeOverEndsAbandonedTransaction(t *testing.T) {
	srv := testenv.MongoWire(t) // the default lifetime limit: 60 s
	c := testenv.MongoClient(t, srv.URI())
	first, _ := keeper(t, srv.URI(), mongosink.Config{})
	commit(t, first, records(0, change{cdc.OpInsert, "shop.orders", 1, 1}))

	// What a tide killed between its writes and its commit leaves: the
	// owner's session, a transaction holding the checkpoint document.
	var owner struct {
		Session bson.Raw `bson:"session"`
	}
	if err := c.Database("tide").Collection("tide_checkpoints").FindOne(t.Context(), bson.D{{Key: "_id", Value: "p"}}).Decode(&owner); err != nil {
		t.Fatal(err)
	}
	abandon(t, srv.URI())

	start := time.Now()
	second, cp := keeper(t, srv.URI(), mongosink.Config{})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("takeover took %s: it waited for the abandoned transaction", d)
	}
	if cp == nil || string(cp.Source) != `{"t":0}` {
		t.Fatalf("loaded %+v, want the last committed checkpoint", cp)
	}
	commit(t, second, records(1, change{cdc.OpInsert, "shop.orders", 2, 2}))
	if got := docs(t, c, "shop", "orders"); !maps.Equal(got, map[int64]int{1: 1, 2: 2}) {
		t.Errorf("shop.orders = %v, want nothing of the abandoned transaction", got)
	}
	first.Close()
}

// abandon opens a transaction as the pipeline's owner would, writing a
// document and the checkpoint document, and leaves it open: the client
// is not disconnected until the test ends. It records the session as the
// owner's, as a sink's Load does.
func abandon(t *testing.T, uri string) {
	t.Helper()
	c := testenv.MongoClient(t, uri)
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.EndSession(context.Background()) })
	ckpts := c.Database("tide").Collection("tide_checkpoints")
	if _, err := ckpts.UpdateOne(t.Context(), bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "session", Value: sess.ID()}}}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sctx := mongo.NewSessionContext(t.Context(), sess)
	if _, err := c.Database("shop").Collection("orders").InsertOne(sctx, bson.D{{Key: "_id", Value: 99}, {Key: "n", Value: 99}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ckpts.UpdateOne(sctx, bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "checkpoint", Value: `{"source":{"t":"abandoned"}}`}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownCommitResult: a commit that succeeded but whose reply says
// its outcome is unknown (a write concern error, twice, as the driver
// retries the commit once) is resolved by reading the checkpoint: the
// batch is not written again.
func TestUnknownCommitResult(t *testing.T) {
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.EnableTestCommands = true })
	c := testenv.MongoClient(t, srv.URI())
	s, _ := keeper(t, srv.URI(), mongosink.Config{})
	err := c.Database("admin").RunCommand(t.Context(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"commitTransaction"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "codeName", Value: "WriteConcernFailed"}, {Key: "errmsg", Value: "waiting for replication timed out"}}}}},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, records(0, change{cdc.OpInsert, "shop.orders", 1, 1}, change{cdc.OpInsert, "shop.orders", 2, 2}))
	st := s.Stats()
	if st.Resolved != 1 {
		t.Errorf("Stats %+v: want one commit of unknown outcome resolved", st)
	}
	if got := checkpointOf(t, srv.URI(), "p"); got == nil || string(got.Source) != `{"t":1}` {
		t.Errorf("checkpoint %+v", got)
	}
	if n := count(t, c, "shop", "orders"); n != 2 {
		t.Errorf("shop.orders holds %d documents, want 2", n)
	}
}

// TestDeadLetterInTransaction: a refused document goes to the dead-letter
// collection in the batch's transaction.
func TestDeadLetterInTransaction(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	if _, err := c.Database("shop").Collection("orders").Indexes().CreateOne(t.Context(), mongoIndex(bson.D{{Key: "n", Value: 1}})); err != nil {
		t.Fatal(err)
	}
	batch := records(0, change{cdc.OpInsert, "shop.orders", 1, 1}, change{cdc.OpInsert, "shop.orders", 2, 1}, change{cdc.OpInsert, "shop.orders", 3, 3})

	// Without a dead-letter collection the batch fails, and nothing of it
	// is written.
	s, _ := keeper(t, srv.URI(), mongosink.Config{})
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(t.Context(), cdc.Checkpoint{Source: batch[2].Pos})
	if err == nil || !strings.HasPrefix(err.Error(), "mongo sink: shop.orders refused the insert of _id 2") {
		t.Fatalf("Commit = %v, want the refusal of _id 2 in shop.orders", err)
	}
	if n := count(t, c, "shop", "orders"); n != 0 {
		t.Fatalf("shop.orders holds %d documents after a failed transaction, want 0", n)
	}
	s.Close()

	s, _ = keeper(t, srv.URI(), mongosink.Config{OnWriteError: mongosink.OnWriteErrorDeadLetter})
	commit(t, s, batch)
	if got := docs(t, c, "shop", "orders"); !maps.Equal(got, map[int64]int{1: 1, 3: 3}) {
		t.Errorf("shop.orders = %v", got)
	}
	if n := count(t, c, "tide", "tide_dead_letters"); n != 1 {
		var raws []bson.Raw
		cur, _ := c.Database("tide").Collection("tide_dead_letters").Find(t.Context(), bson.D{})
		_ = cur.All(t.Context(), &raws)
		t.Errorf("tide.tide_dead_letters holds %d documents, want 1: %v", n, raws)
	}
	if got := checkpointOf(t, srv.URI(), "p"); got == nil || string(got.Source) != `{"t":2}` {
		t.Errorf("checkpoint %+v", got)
	}
}

// TestLoadUnreachable: Load of an unreachable target names the URI
// without its password.
func TestLoadUnreachable(t *testing.T) {
	s := mongosink.New(mongosink.Config{URI: "mongodb://u:pw@127.0.0.1:1/?serverSelectionTimeoutMS=200", Pipeline: "p"})
	defer s.Close()
	_, err := s.Checkpoints().Load(t.Context(), "p")
	if err == nil || !strings.Contains(err.Error(), "mongodb://u:xxxxx@127.0.0.1:1") || strings.Contains(err.Error(), ":pw@") {
		t.Errorf("Load = %v", err)
	}
}

// TestRewriteCheckpoint: tide checkpoint set's rewrite replaces the
// checkpoint and takes the pipeline over, so that a sink still running
// it stops at its next commit instead of overwriting the new checkpoint.
func TestRewriteCheckpoint(t *testing.T) {
	srv := testenv.MongoWire(t)
	running, _ := keeper(t, srv.URI(), mongosink.Config{})
	commit(t, running, records(0, change{cdc.OpInsert, "shop.orders", 1, 1}))
	err := mongosink.RewriteCheckpoint(t.Context(), mongosink.Config{URI: srv.URI(), Pipeline: "p"}, func(cp *cdc.Checkpoint) (*cdc.Checkpoint, error) {
		if cp == nil || string(cp.Source) != `{"t":0}` {
			t.Errorf("rewrite saw %+v, want the committed checkpoint", cp)
		}
		return &cdc.Checkpoint{Source: cdc.Position(`{"t":"set"}`)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := checkpointOf(t, srv.URI(), "p"); got == nil || string(got.Source) != `{"t":"set"}` {
		t.Errorf("checkpoint after the rewrite %+v", got)
	}
	if err := running.Put(t.Context(), records(1, change{cdc.OpInsert, "shop.orders", 2, 2})); err != nil {
		t.Fatal(err)
	}
	if err := running.Commit(t.Context(), cdc.Checkpoint{Source: cdc.Position(`{"t":1}`)}); err == nil || !strings.Contains(err.Error(), "another tide took over") {
		t.Errorf("Commit of the sink running during the rewrite = %v, want it fenced", err)
	}
	if got := checkpointOf(t, srv.URI(), "p"); string(got.Source) != `{"t":"set"}` {
		t.Errorf("checkpoint %+v: overwritten by the fenced sink", got)
	}
}
