package mongowire_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// TestTransactionWithTransaction: the Go driver's WithTransaction commits
// atomically; another session sees nothing until then, and the oplog and
// change streams show one event per operation, each with lsid and
// txnNumber, at one cluster time.
func TestTransactionWithTransaction(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	coll := client.Database("txn").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)

	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		if _, err := coll.InsertMany(sc, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
			return nil, err
		}
		if _, err := coll.UpdateOne(sc, bson.D{{Key: "_id", Value: 0}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
			return nil, err
		}
		// Its own writes are visible to it...
		if n, err := coll.CountDocuments(sc, bson.D{}); err != nil || n != 3 {
			t.Errorf("inside: count %d, %v; want 3", n, err)
		}
		// ...and to nobody else.
		if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
			t.Errorf("outside: count %d, %v; want 1", n, err)
		}
		var d bson.M
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 0}}).Decode(&d); err != nil || d["x"] != nil {
			t.Errorf("outside sees the uncommitted update: %v %v", d, err)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 3 {
		t.Fatalf("after commit: %d documents, want 3", n)
	}
	// The oplog holds it as mongod does: one applyOps entry.
	var entry bson.Raw
	if entry, err = client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{{Key: "o.applyOps", Value: bson.D{{Key: "$exists", Value: true}}}}).Raw(); err != nil {
		t.Fatal(err)
	}
	if ops, _ := entry.Lookup("o", "applyOps").Array().Values(); len(ops) != 3 || ops[2].Document().Lookup("op").StringValue() != "u" {
		t.Fatalf("applyOps entry %s: want insert, insert, update", entry)
	}
	if _, ok := entry.Lookup("txnNumber").Int64OK(); !ok {
		t.Fatalf("applyOps entry without txnNumber: %s", entry)
	}
	var first bson.Timestamp
	for i := 0; i < 3; i++ {
		if !cs.Next(ctx) {
			t.Fatalf("change stream ended: %v", cs.Err())
		}
		ev := cs.Current
		if _, err := ev.LookupErr("lsid", "id"); err != nil {
			t.Fatalf("event %d has no lsid: %s", i, ev)
		}
		if n, ok := ev.Lookup("txnNumber").Int64OK(); !ok || n < 1 {
			t.Fatalf("event %d has no txnNumber: %s", i, ev)
		}
		tsT, tsI := ev.Lookup("clusterTime").Timestamp()
		ts := bson.Timestamp{T: tsT, I: tsI}
		if i == 0 {
			first = ts
		} else if ts != first {
			t.Fatalf("event %d at %v, the first at %v: want one cluster time", i, ts, first)
		}
		want := []string{"insert", "insert", "update"}[i]
		if op := ev.Lookup("operationType").StringValue(); op != want {
			t.Fatalf("event %d is %s, want %s", i, op, want)
		}
	}
}

// TestTransactionAbortAndErrors: abort takes everything back; the
// protocol errors are mongod's.
func TestTransactionAbortAndErrors(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	coll := client.Database("txn").Collection("c")
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sc := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("after abort: %d documents", n)
	}

	db := client.Database("admin")
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}
	stmt := func(cmd bson.D, number int64, extra ...bson.E) error {
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: number}, bson.E{Key: "autocommit", Value: false})
		return db.RunCommand(ctx, append(cmd, extra...)).Err()
	}
	commit := bson.D{{Key: "commitTransaction", Value: 1}}
	err = stmt(commit, 5)
	wantCode(t, err, 251, "does not match any in-progress transactions")
	wantLabel(t, err, "TransientTransactionError")

	start := bson.E{Key: "startTransaction", Value: true}
	tdb := client.Database("txn")
	tstmt := func(cmd bson.D, number int64, extra ...bson.E) error {
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: number}, bson.E{Key: "autocommit", Value: false})
		return tdb.RunCommand(ctx, append(cmd, extra...)).Err()
	}
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 7}}}}}
	if err := tstmt(ins, 5, start); err != nil {
		t.Fatal(err)
	}
	wantCode(t, tstmt(bson.D{{Key: "count", Value: "c"}}, 5), 263, "Cannot run 'count' in a multi-document transaction.")
	wantCode(t, tstmt(ins, 4, start), 225, "newer transaction 5")
	wantCode(t, tstmt(bson.D{{Key: "find", Value: "c"}}, 5, bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}}}), 72, "Only the first command")
	if err := tstmt(ins, 6, start); err != nil { // starting 6 aborts 5
		t.Fatal(err)
	}
	wantCode(t, stmt(commit, 5), 251, "does not match")
	if err := stmt(commit, 6); err != nil {
		t.Fatal(err)
	}
	if err := stmt(commit, 6); err != nil {
		t.Fatalf("a retried commit: %v", err)
	}
	wantCode(t, stmt(bson.D{{Key: "abortTransaction", Value: 1}}, 6), 256, "has been committed")
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("%d documents, want the one of transaction 6", n)
	}
	// A failed statement aborts the transaction.
	if err := tstmt(ins, 7, start); err == nil {
		t.Fatal("duplicate key in a transaction: no error")
	}
	err = stmt(commit, 7)
	wantCode(t, err, 251, "aborted")
	wantLabel(t, err, "TransientTransactionError")
}

func wantLabel(t *testing.T, err error, label string) {
	t.Helper()
	var le mongo.LabeledError
	if !errors.As(err, &le) || !le.HasErrorLabel(label) {
		t.Fatalf("error %v lacks the %s label", err, label)
	}
}

// TestTransactionWriteConflict: the second writer of a document gets
// WriteConflict with TransientTransactionError, and WithTransaction
// retries it to success once the first commits.
func TestTransactionWriteConflict(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	coll := client.Database("txn").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	one := bson.D{{Key: "_id", Value: 1}}
	a, _ := client.StartSession()
	b, _ := client.StartSession()
	defer a.EndSession(ctx)
	defer b.EndSession(ctx)
	a.StartTransaction()
	b.StartTransaction()
	ac, bc := mongo.NewSessionContext(ctx, a), mongo.NewSessionContext(ctx, b)
	if _, err := coll.UpdateOne(ac, one, inc); err != nil {
		t.Fatal(err)
	}
	_, err := coll.UpdateOne(bc, one, inc)
	wantCode(t, err, 112, "Write conflict")
	wantLabel(t, err, "TransientTransactionError")
	if err := a.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	b.AbortTransaction(ctx)

	// Concurrent WithTransaction increments all land.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.StartSession()
			if err != nil {
				errs <- err
				return
			}
			defer s.EndSession(ctx)
			for range 5 {
				if _, err := s.WithTransaction(ctx, func(sc context.Context) (any, error) {
					return coll.UpdateOne(sc, one, inc)
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var d struct{ N int32 }
	if err := coll.FindOne(ctx, one).Decode(&d); err != nil || d.N != 21 {
		t.Fatalf("n = %d (%v), want 21", d.N, err)
	}
}

// TestTransactionLifetimeAndEndSession: a transaction open too long is
// aborted, releasing the documents it wrote; ending a session aborts its
// transaction.
func TestTransactionLifetimeAndEndSession(t *testing.T) {
	_, client := setup(t, func(c *mongowire.Config) { c.TransactionLifetimeLimit = 200 * time.Millisecond })
	ctx := t.Context()
	coll := client.Database("txn").Collection("c")
	sess, _ := client.StartSession()
	sess.StartTransaction()
	sc := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	err := sess.CommitTransaction(ctx)
	wantCode(t, err, 251, "aborted")
	sess.EndSession(ctx)
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d documents after the transaction expired", n)
	}

	// endSessions aborts: a plain write waiting on its document goes on.
	sess2, _ := client.StartSession()
	sess2.StartTransaction()
	sc2 := mongo.NewSessionContext(ctx, sess2)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(sc2, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	id := sess2.ID()
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "endSessions", Value: bson.A{id}}}).Err(); err != nil {
		t.Fatal(err)
	}
	var d struct{ V int32 }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&d); err != nil || d.V != 0 {
		t.Fatalf("v = %d (%v) after endSessions, want 0", d.V, err)
	}
	sess2.EndSession(ctx)
}

// TestRetryableWriteNotRefused: a plain retryable write is never refused
// with code 20 (the Node driver would ask for retryWrites=false).
func TestRetryableWriteNotRefused(t *testing.T) {
	s, _ := setup(t)
	client, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetRetryWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	coll := client.Database("txn").Collection("r")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "a", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateMany(t.Context(), bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionFailPointLabels: an injected error on a statement of a
// transaction is labelled as mongod labels it: transient for a write
// conflict, RetryableWriteError on commit (and the driver adds
// UnknownTransactionCommitResult), never RetryableWriteError on a
// statement.
func TestTransactionFailPointLabels(t *testing.T) {
	_, client := setup(t, func(c *mongowire.Config) { c.EnableTestCommands = true })
	ctx := t.Context()
	admin := client.Database("admin")
	failOnce := func(cmd string, code int32) {
		t.Helper()
		if err := admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{cmd}}, {Key: "errorCode", Value: code}}}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	coll := client.Database("txn").Collection("fp")
	sess, _ := client.StartSession()
	defer sess.EndSession(ctx)
	sc := mongo.NewSessionContext(ctx, sess)

	sess.StartTransaction()
	failOnce("insert", 112)
	_, err := coll.InsertOne(sc, bson.D{})
	wantLabel(t, err, "TransientTransactionError")
	var le mongo.LabeledError
	if errors.As(err, &le) && le.HasErrorLabel("RetryableWriteError") {
		t.Fatalf("a statement of a transaction labelled retryable: %v", err)
	}
	sess.AbortTransaction(ctx)

	sess.StartTransaction()
	if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	failOnce("commitTransaction", 91)
	if err := sess.CommitTransaction(ctx); err != nil { // the driver retries it once
		t.Fatalf("commit after one injected ShutdownInProgress: %v", err)
	}
	if n, _ := coll.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("%d documents after the retried commit, want 1", n)
	}

	// A transient code on commit: TransientTransactionError, so that
	// withTransaction runs the whole transaction again.
	for _, code := range []int32{24, 112, 246, 251, 267} {
		sess.StartTransaction()
		if _, err := coll.InsertOne(sc, bson.D{}); err != nil {
			t.Fatal(err)
		}
		failOnce("commitTransaction", code)
		err := sess.CommitTransaction(ctx)
		wantLabel(t, err, "TransientTransactionError")
		sess.AbortTransaction(ctx)
	}
}

// TestTransactionCreate: a collection created in a transaction is gone
// after an abort and kept after a commit; create with options is refused.
func TestTransactionCreate(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	db := client.Database("txnc")
	sess, _ := client.StartSession()
	defer sess.EndSession(ctx)
	sc := mongo.NewSessionContext(ctx, sess)
	names := func() []string {
		t.Helper()
		n, err := db.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sess.StartTransaction()
	if err := db.CreateCollection(sc, "made"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("made").InsertOne(sc, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	sess.AbortTransaction(ctx)
	if n := names(); len(n) != 0 {
		t.Fatalf("after abort: collections %v", n)
	}
	sess.StartTransaction()
	if err := db.CreateCollection(sc, "made"); err != nil {
		t.Fatal(err)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if n := names(); len(n) != 1 || n[0] != "made" {
		t.Fatalf("after commit: collections %v", n)
	}
	sess.StartTransaction()
	err := db.CreateCollection(sc, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096))
	wantCode(t, err, 263, "capped")
	sess.AbortTransaction(ctx)
}

// TestTransactionGetMore: a cursor opened in a transaction is read on
// with getMore inside it; aggregate and distinct see its writes.
func TestTransactionGetMore(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	coll := client.Database("txn").Collection("gm")
	sess, _ := client.StartSession()
	defer sess.EndSession(ctx)
	_, err := sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
		for i := range 5 {
			if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: i}, {Key: "g", Value: i % 2}}); err != nil {
				return nil, err
			}
		}
		cur, err := coll.Find(sc, bson.D{}, options.Find().SetBatchSize(2))
		if err != nil {
			return nil, err
		}
		var docs []bson.M
		if err := cur.All(sc, &docs); err != nil {
			return nil, err
		}
		if len(docs) != 5 {
			t.Errorf("find in the transaction: %d documents, want 5", len(docs))
		}
		vals := coll.Distinct(sc, "g", bson.D{})
		var gs []int32
		if err := vals.Decode(&gs); err != nil || len(gs) != 2 {
			t.Errorf("distinct in the transaction: %v %v", gs, err)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTransactionCreatedCollectionIsPrivate: a collection a transaction
// creates (by create, an insert or createIndexes) does not exist for
// anyone else until the commit; a write outside waits for the
// transaction rather than writing into a collection an abort would drop;
// indexes can be created in a transaction only on such a collection.
func TestTransactionCreatedCollectionIsPrivate(t *testing.T) {
	_, client := setup(t)
	ctx := t.Context()
	db := client.Database("txnp")
	sess, _ := client.StartSession()
	defer sess.EndSession(ctx)
	sc := mongo.NewSessionContext(ctx, sess)
	names := func() []string {
		t.Helper()
		n, err := db.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	indexes := func(coll string) []string {
		t.Helper()
		specs, err := db.Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return out
	}

	sess.StartTransaction()
	if _, err := db.Collection("ix").Indexes().CreateOne(sc, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatalf("createIndexes on a new collection in a transaction: %v", err)
	}
	if n := names(); len(n) != 0 {
		t.Fatalf("collections seen outside the open transaction: %v", n)
	}
	if ix := indexes("ix"); len(ix) != 0 {
		t.Fatalf("indexes seen outside the open transaction: %v", ix)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if ix := indexes("ix"); len(ix) != 2 || ix[1] != "x_1" {
		t.Fatalf("indexes after the commit: %v, want [_id_ x_1]", ix)
	}

	sess.StartTransaction()
	_, err := db.Collection("ix").Indexes().CreateOne(sc, mongo.IndexModel{Keys: bson.D{{Key: "y", Value: 1}}})
	wantCode(t, err, 263, "existing collection")
	sess.AbortTransaction(ctx)

	// An insert outside into a collection an open transaction created
	// waits for it; after an abort it creates the collection itself.
	sess.StartTransaction()
	if err := db.CreateCollection(sc, "made"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.Collection("made").InsertOne(ctx, bson.D{{Key: "_id", Value: "outside"}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("insert outside returned (%v) while the transaction that created the collection is open", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := sess.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("insert outside after the abort: %v", err)
	}
	if n, err := db.Collection("made").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("after the abort the outside insert left %d documents (%v), want 1", n, err)
	}
}
