package mongowire

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// csServer starts a server with change streams and test commands, and a
// driver client connected to it; both close when the test ends.
func csServer(t *testing.T, mods ...func(*Config)) (*Server, *mongo.Client) {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", EnableTestCommands: true, Logger: slog.New(slog.DiscardHandler)}
	for _, m := range mods {
		m(&cfg)
	}
	s := New(cfg)
	if s.openChangeStream == nil {
		s.openChangeStream = s.openChangeStreamSource
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return s, c
}

// next reads one event, failing the test if none arrives in time.
func next(t *testing.T, cs *mongo.ChangeStream) bson.Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !cs.Next(ctx) {
		t.Fatalf("no event: %v", cs.Err())
	}
	return slices.Clone(cs.Current)
}

func opType(ev bson.Raw) string { return ev.Lookup("operationType").StringValue() }

func watch(t *testing.T, w interface {
	Watch(context.Context, any, ...options.Lister[options.ChangeStreamOptions]) (*mongo.ChangeStream, error)
}, pipeline any, opts ...options.Lister[options.ChangeStreamOptions]) *mongo.ChangeStream {
	t.Helper()
	if pipeline == nil {
		pipeline = mongo.Pipeline{}
	}
	cs, err := w.Watch(t.Context(), pipeline, opts...)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	return cs
}

func TestChangeStreamCollectionEvents(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(2*time.Second))
	start := slices.Clone(cs.ResumeToken())
	if start == nil {
		t.Fatal("no resume token before the first event")
	}

	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "y", Value: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"insert", "update", "replace", "delete", "drop", "invalidate"}
	prev := string(start)
	for i, op := range want {
		ev := next(t, cs)
		if got := opType(ev); got != op {
			t.Fatalf("event %d is %s, want %s: %s", i, got, op, ev)
		}
		tok := cs.ResumeToken()
		if string(tok) != string(ev.Lookup("_id").Value) {
			t.Errorf("event %d: ResumeToken %s is not the event's _id %s", i, tok, ev.Lookup("_id"))
		}
		data := bson.Raw(tok).Lookup("_data").StringValue()
		if data <= bson.Raw(prev).Lookup("_data").StringValue() {
			t.Errorf("event %d token %s does not sort after the previous one", i, data)
		}
		prev = string(tok)
		switch op {
		case "insert":
			if ev.Lookup("fullDocument", "x").Int32() != 1 || ev.Lookup("documentKey", "_id").Int32() != 1 {
				t.Errorf("insert event %s", ev)
			}
		case "update":
			if ev.Lookup("updateDescription", "updatedFields", "x").Int32() != 2 {
				t.Errorf("update event %s", ev)
			}
		case "replace":
			if ev.Lookup("fullDocument", "y").Int32() != 3 {
				t.Errorf("replace event %s", ev)
			}
		}
	}
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cs.Next(ctx2) {
		t.Fatalf("an event after invalidate: %s", cs.Current)
	}
	if err := cs.Err(); err != nil {
		t.Fatalf("after invalidate: %v", err)
	}
}

func TestChangeStreamDatabaseAndCluster(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	dbStream := watch(t, c.Database("d"), nil)
	clusterStream := watch(t, c, nil)
	for _, ns := range []struct{ db, coll string }{{"d", "a"}, {"e", "b"}, {"d", "b"}} {
		if _, err := c.Database(ns.db).Collection(ns.coll).InsertOne(ctx, bson.D{{Key: "ns", Value: ns.db + "." + ns.coll}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"d.a", "d.b"} {
		if got := next(t, dbStream).Lookup("fullDocument", "ns").StringValue(); got != want {
			t.Errorf("database stream: got %s, want %s", got, want)
		}
	}
	for _, want := range []string{"d.a", "e.b", "d.b"} {
		if got := next(t, clusterStream).Lookup("fullDocument", "ns").StringValue(); got != want {
			t.Errorf("cluster stream: got %s, want %s", got, want)
		}
	}
	if err := c.Database("d").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for {
		ev := next(t, dbStream)
		ops = append(ops, opType(ev))
		if opType(ev) == "invalidate" {
			break
		}
	}
	if ops[len(ops)-2] != "dropDatabase" {
		t.Errorf("database stream after dropDatabase: %v", ops)
	}
}

func TestChangeStreamResume(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil)
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	var tokens []bson.Raw
	var times []bson.Timestamp
	for range 5 {
		ev := next(t, cs)
		tokens = append(tokens, slices.Clone(cs.ResumeToken()))
		ts, i := ev.Lookup("clusterTime").Timestamp()
		times = append(times, bson.Timestamp{T: ts, I: i})
	}
	ids := func(cs *mongo.ChangeStream, n int) []int32 {
		var out []int32
		for range n {
			out = append(out, next(t, cs).Lookup("documentKey", "_id").Int32())
		}
		return out
	}
	tests := map[string]struct {
		opts *options.ChangeStreamOptionsBuilder
		want []int32
	}{
		"resumeAfter":          {options.ChangeStream().SetResumeAfter(tokens[1]), []int32{2, 3, 4}},
		"startAfter":           {options.ChangeStream().SetStartAfter(tokens[2]), []int32{3, 4}},
		"startAtOperationTime": {options.ChangeStream().SetStartAtOperationTime(&times[1]), []int32{1, 2, 3, 4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ids(watch(t, coll, nil, tc.opts), len(tc.want))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	// A token of another collection's stream is not found there: 280,
	// from the aggregate itself since later writes are already there.
	other := c.Database("d").Collection("other")
	_, err := other.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(tokens[0]))
	requireCode(t, err, 280, "NonResumableChangeStreamError")
}

func requireCode(t *testing.T, err error, code int32, label string) {
	t.Helper()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(int(code)) {
		t.Fatalf("got %v, want code %d", err, code)
	}
	if label != "" && !se.HasErrorLabel(label) {
		t.Errorf("error %v lacks label %s", err, label)
	}
}

func TestChangeStreamStartAfterInvalidate(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, coll, nil)
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if op := opType(next(t, cs)); op != "drop" {
		t.Fatalf("got %s, want drop", op)
	}
	inv := next(t, cs)
	if opType(inv) != "invalidate" {
		t.Fatalf("got %s, want invalidate", opType(inv))
	}
	invTok := slices.Clone(cs.ResumeToken())

	_, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(invTok))
	requireCode(t, err, 260, "")

	after := watch(t, coll, nil, options.ChangeStream().SetStartAfter(invTok))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 7}}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, after)
	if opType(ev) != "insert" || ev.Lookup("documentKey", "_id").Int32() != 7 {
		t.Fatalf("after startAfter invalidate: %s", ev)
	}
}

func TestChangeStreamRenameInvalidates(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, coll, nil)
	err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "d.c"}, {Key: "to", Value: "d.c2"}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, cs)
	if opType(ev) != "rename" || ev.Lookup("to", "coll").StringValue() != "c2" || ev.Index(0).Key() != "to" {
		t.Fatalf("rename event %s", ev)
	}
	if op := opType(next(t, cs)); op != "invalidate" {
		t.Fatalf("got %s, want invalidate", op)
	}
}

func TestChangeStreamIdleTokenAdvances(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetBatchSize(0).SetMaxAwaitTime(50*time.Millisecond))
	first := bson.Raw(slices.Clone(cs.ResumeToken())).Lookup("_data").StringValue()
	if first == "" {
		t.Fatal("no token from an empty first batch")
	}
	// Writes elsewhere move the cluster time; the idle stream's
	// high-water mark follows them.
	if _, err := c.Database("d").Collection("elsewhere").InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	// The driver's first TryNext only consumes the empty first batch; the
	// second runs a getMore.
	for range 2 {
		if cs.TryNext(ctx) {
			t.Fatalf("unexpected event %s", cs.Current)
		}
		if err := cs.Err(); err != nil {
			t.Fatal(err)
		}
	}
	second := bson.Raw(cs.ResumeToken()).Lookup("_data").StringValue()
	if second <= first {
		t.Fatalf("idle token did not advance: %s then %s", first, second)
	}
	// Resuming from the high-water mark sees the next write.
	resumed := watch(t, coll, nil, options.ChangeStream().SetResumeAfter(cs.ResumeToken()))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "after"}}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, resumed).Lookup("documentKey", "_id").StringValue(); got != "after" {
		t.Fatalf("got %s", got)
	}
}

// The driver resumes by itself after a getMore fails with a closed
// connection, and every event arrives exactly once, in order.
func TestChangeStreamDriverResumes(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
	const n = 30
	fail := func() {
		err := c.Database("admin").RunCommand(ctx, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore"}}, {Key: "closeConnection", Value: true}}},
		}).Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 5 {
			fail()
		}
	}
	for i := range n {
		if i%7 == 3 {
			fail()
		}
		if got := next(t, cs).Lookup("documentKey", "_id").Int32(); got != int32(i) {
			t.Fatalf("event %d has _id %d", i, got)
		}
	}
	ctx2, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if cs.Next(ctx2) {
		t.Fatalf("duplicate event %s", cs.Current)
	}
}

func TestChangeStreamResumableLabel(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	err := c.Database("admin").RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "errorCode", Value: 91}}},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	// ShutdownInProgress is labelled resumable, so the driver resumes and
	// the event still arrives.
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !cs.Next(ctx2) {
		t.Fatalf("no event: %v", cs.Err())
	}
	if got := cs.Current.Lookup("documentKey", "_id").Int32(); got != 1 {
		t.Fatalf("got %d", got)
	}
}

func TestChangeStreamHistoryLost(t *testing.T) {
	_, c := csServer(t, func(cfg *Config) { cfg.OplogBytes = 64 << 10 })
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	tok := slices.Clone(cs.ResumeToken())
	pad := make([]byte, 4096)
	for i := range 100 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(tok))
	requireCode(t, err, 286, "NonResumableChangeStreamError")
}

func TestChangeStreamPrePostImages(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	db := c.Database("d")
	err := db.CreateCollection(ctx, "c", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}}))
	if err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	cs := watch(t, coll, nil, options.ChangeStream().
		SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required))
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	up := next(t, cs)
	if up.Lookup("fullDocument", "x").Int32() != 2 || up.Lookup("fullDocumentBeforeChange", "x").Int32() != 1 {
		t.Fatalf("update images: %s", up)
	}
	del := next(t, cs)
	if opType(del) != "delete" || del.Lookup("fullDocumentBeforeChange", "x").Int32() != 2 {
		t.Fatalf("delete pre-image: %s", del)
	}

	// Without pre-images, required fails with 47.
	plain := db.Collection("plain")
	pcs := watch(t, plain, nil, options.ChangeStream().SetFullDocumentBeforeChange(options.Required))
	if _, err := plain.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	next(t, pcs) // the insert has no pre-image to need
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if pcs.Next(ctx2) {
		t.Fatalf("delete without a pre-image: %s", pcs.Current)
	}
	requireCode(t, pcs.Err(), 47, "")
}

func TestChangeStreamUpdateLookup(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetFullDocument(options.UpdateLookup))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	up := next(t, cs)
	// Looked up when read: the document is gone by then.
	if v := up.Lookup("fullDocument"); v.Type != bson.TypeNull {
		t.Fatalf("fullDocument of a deleted document: %s", v)
	}
}

func TestChangeStreamOpenErrors(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	tests := map[string]struct {
		db       string
		cmd      bson.D
		wantCode int32
	}{
		"unknown option":                     {"d", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "foo", Value: 1}}}}}}, {Key: "cursor", Value: bson.D{}}}, 40415},
		"bad fullDocument":                   {"d", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "fullDocument", Value: "x"}}}}}}, {Key: "cursor", Value: bson.D{}}}, 2},
		"group follows":                      {"d", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}}}, {Key: "cursor", Value: bson.D{}}}, 20},
		"unknown stage":                      {"d", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}, bson.D{{Key: "$foo", Value: 1}}}}, {Key: "cursor", Value: bson.D{}}}, 40324},
		"admin without allChangesForCluster": {"admin", bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}, 73},
		"changeStream not first":             {"d", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}, bson.D{{Key: "$changeStream", Value: bson.D{}}}}}, {Key: "cursor", Value: bson.D{}}}, 40602},
		"allChangesForCluster elsewhere":     {"d", bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "allChangesForCluster", Value: true}}}}}}, {Key: "cursor", Value: bson.D{}}}, 72},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := c.Database(tc.db).RunCommand(ctx, tc.cmd).Err()
			requireCode(t, err, tc.wantCode, "")
		})
	}
}

// A getMore waiting for events returns as soon as a write lands, long
// before its maxTimeMS.
func TestChangeStreamWakesOnWrite(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(10*time.Second))
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		if cs.Next(ctx) {
			done <- time.Since(start)
			return
		}
		done <- -1
	}()
	if _, err := coll.InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d < 0 || d > 5*time.Second {
		t.Fatalf("event took %v with a 10 s await", d)
	}
}

// TestMongoshChangeStream runs tests/mongosh/changestream.js with mongosh.
// Without mongosh on PATH it skips, saying so, unless
// TIDE_REQUIRE_MONGOSH=1 (CI), where a missing mongosh fails the test.
func TestMongoshChangeStream(t *testing.T) {
	bin, err := exec.LookPath("mongosh")
	if err != nil {
		if os.Getenv("TIDE_REQUIRE_MONGOSH") == "1" {
			t.Fatal("mongosh is not on PATH, and TIDE_REQUIRE_MONGOSH=1 requires it (npm install -g mongosh)")
		}
		t.Skip("mongosh is not on PATH: install it with `npm install -g mongosh` to run the scripted session (CI sets TIDE_REQUIRE_MONGOSH=1)")
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "tests", "mongosh", "changestream.js")
	s, _ := csServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "mongodb://"+s.Addr()+"/?directConnection=true", "--quiet", "--norc", "--file", script)
	cmd.Env = append(os.Environ(), "MONGOSH_NO_TELEMETRY=1", "DO_NOT_TRACK=1")
	out, err := cmd.CombinedOutput()
	t.Logf("mongosh output:\n%s", out)
	if err != nil {
		t.Fatalf("mongosh %s: %v", filepath.Base(script), err)
	}
}

func TestChangeStreamExpandedEvents(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	db := c.Database("d")
	cs := watch(t, db, nil, options.ChangeStream().SetShowExpandedEvents(true))
	plain := watch(t, db, nil)

	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("c")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := coll.Indexes().DropOne(ctx, "x_1"); err != nil {
		t.Fatal(err)
	}
	err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "c"},
		{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCollection(ctx, "target"); err != nil {
		t.Fatal(err)
	}
	err = c.Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "d.c"}, {Key: "to", Value: "d.target"}, {Key: "dropTarget", Value: true}}).Err()
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		op   string
		keys []string
	}
	wants := []want{
		{"create", []string{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
		{"createIndexes", []string{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
		{"dropIndexes", []string{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
		{"modify", []string{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription", "stateBeforeChange"}},
		{"insert", []string{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "fullDocument", "ns", "documentKey"}},
		{"create", nil},
		{"rename", []string{"to", "_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
	}
	var uuid bson.RawValue
	for i, w := range wants {
		ev := next(t, cs)
		if opType(ev) != w.op {
			t.Fatalf("event %d is %s, want %s: %s", i, opType(ev), w.op, ev)
		}
		if w.keys != nil {
			var keys []string
			elems, _ := ev.Elements()
			for _, e := range elems {
				keys = append(keys, e.Key())
			}
			if !slices.Equal(keys, w.keys) {
				t.Errorf("%s keys\n got %v\nwant %v", w.op, keys, w.keys)
			}
		}
		switch w.op {
		case "createIndexes", "dropIndexes":
			if name := ev.Lookup("operationDescription", "indexes", "0", "name").StringValue(); name != "x_1" {
				t.Errorf("%s index name %q", w.op, name)
			}
		case "modify":
			if !ev.Lookup("operationDescription", "changeStreamPreAndPostImages", "enabled").Boolean() {
				t.Errorf("modify description %s", ev.Lookup("operationDescription"))
			}
		case "rename":
			if ev.Lookup("operationDescription", "to", "coll").StringValue() != "target" {
				t.Errorf("rename description %s", ev.Lookup("operationDescription"))
			}
			if sub, _ := ev.Lookup("operationDescription", "dropTarget").Binary(); sub != 4 {
				t.Errorf("rename dropTarget %s", ev.Lookup("operationDescription", "dropTarget"))
			}
		}
		if i == 0 {
			uuid = ev.Lookup("collectionUUID")
		} else if i < 5 && !uuid.Equal(ev.Lookup("collectionUUID")) {
			t.Errorf("%s collectionUUID %s, want %s", w.op, ev.Lookup("collectionUUID"), uuid)
		}
	}
	// Without showExpandedEvents only the classic events show.
	for _, op := range []string{"insert", "rename"} {
		if got := opType(next(t, plain)); got != op {
			t.Errorf("plain stream: got %s, want %s", got, op)
		}
	}
}

func TestChangeStreamDropDatabaseEndsCollectionStreams(t *testing.T) {
	_, c := csServer(t)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	existing := watch(t, coll, nil)
	missing := watch(t, c.Database("d").Collection("never"), nil)
	if err := c.Database("d").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cs   *mongo.ChangeStream
		want []string
	}{
		"existing collection": {existing, []string{"drop", "invalidate"}},
		"missing collection":  {missing, []string{"dropDatabase", "invalidate"}},
	} {
		var got []string
		for range tc.want {
			got = append(got, opType(next(t, tc.cs)))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

// An event over 16 MiB fails the getMore with 10334, unless
// $changeStreamSplitLargeEvent ends the pipeline: then it arrives in
// fragments, each within the limit, that resume like events.
func TestChangeStreamLargeEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("moves ~100 MiB; skipped with -short")
	}
	_, c := csServer(t)
	ctx := t.Context()
	db := c.Database("d")
	err := db.CreateCollection(ctx, "big", options.CreateCollection().SetChangeStreamPreAndPostImages(bson.D{{Key: "enabled", Value: true}}))
	if err != nil {
		t.Fatal(err)
	}
	coll := db.Collection("big")
	opts := func() *options.ChangeStreamOptionsBuilder {
		return options.ChangeStream().SetFullDocument(options.Required).SetFullDocumentBeforeChange(options.Required)
	}
	whole := watch(t, coll, nil, opts())
	split := watch(t, coll, mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}, opts())

	nine := make([]byte, 9<<20)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: nine}}); err != nil {
		t.Fatal(err)
	}
	nine[0] = 1
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: nine}}}}); err != nil {
		t.Fatal(err)
	}

	if op := opType(next(t, whole)); op != "insert" {
		t.Fatalf("got %s, want insert", op)
	}
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if whole.Next(ctx2) {
		t.Fatalf("an oversized event was delivered whole (%d bytes)", len(whole.Current))
	}
	requireCode(t, whole.Err(), 10334, "")

	next(t, split) // the insert fits
	var frags []bson.Raw
	for {
		f := next(t, split)
		frags = append(frags, f)
		n := f.Lookup("splitEvent", "fragment").Int32()
		of := f.Lookup("splitEvent", "of").Int32()
		if int(n) != len(frags) {
			t.Fatalf("fragment %d numbered %d", len(frags), n)
		}
		if len(f) > 16<<20 {
			t.Errorf("fragment %d is %d bytes", n, len(f))
		}
		if n == of {
			break
		}
	}
	fields := map[string]bool{}
	for _, f := range frags {
		elems, _ := f.Elements()
		for _, e := range elems {
			fields[e.Key()] = true
		}
	}
	for _, k := range []string{"operationType", "fullDocument", "fullDocumentBeforeChange", "updateDescription", "documentKey"} {
		if !fields[k] {
			t.Errorf("no fragment carries %s", k)
		}
	}
	if len(frags) < 2 {
		t.Fatalf("%d fragments", len(frags))
	}
	// Resuming after the first fragment yields the rest.
	resumed := watch(t, coll, mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}},
		opts().SetResumeAfter(frags[0].Lookup("_id").Document()))
	for i := 1; i < len(frags); i++ {
		if got := next(t, resumed); string(got) != string(frags[i]) {
			t.Fatalf("resumed fragment %d differs", i+1)
		}
	}
}

// A change-stream cursor that was killed, or that expired while idle,
// answers getMore with 43 CursorNotFound; the driver resumes from its
// cached token and no event is lost.
func TestChangeStreamCursorGone(t *testing.T) {
	tests := map[string]func(t *testing.T, s *Server, c *mongo.Client, cs *mongo.ChangeStream){
		"killed": func(t *testing.T, _ *Server, c *mongo.Client, cs *mongo.ChangeStream) {
			err := c.Database("d").RunCommand(t.Context(), bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{cs.ID()}}}).Err()
			if err != nil {
				t.Fatal(err)
			}
		},
		"expired": func(t *testing.T, s *Server, _ *mongo.Client, _ *mongo.ChangeStream) {
			later := time.Now().Add(time.Hour)
			s.now = func() time.Time { return later }
		},
	}
	for name, gone := range tests {
		t.Run(name, func(t *testing.T) {
			s, c := csServer(t)
			ctx := t.Context()
			coll := c.Database("d").Collection("c")
			cs := watch(t, coll, nil, options.ChangeStream().SetBatchSize(0))
			id := cs.ID()
			gone(t, s, c, cs)
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
				t.Fatal(err)
			}
			_, err := c.Database("d").RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Raw()
			requireCode(t, err, 43, "")
			if got := next(t, cs).Lookup("documentKey", "_id").Int32(); got != 1 {
				t.Fatalf("after resume: _id %d", got)
			}
			if cs.ID() == id {
				t.Error("the driver did not open a new cursor")
			}
		})
	}
}

// With a data directory the oplog outlives a restart: a token taken
// before it resumes after it, with nothing lost or repeated.
func TestChangeStreamResumeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s, c := csServer(t, func(cfg *Config) { cfg.DataDir = dir })
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil)
	for i := range 3 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	next(t, cs)
	tok := slices.Clone(cs.ResumeToken())
	cs.Close(ctx)
	c.Disconnect(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	_, c2 := csServer(t, func(cfg *Config) { cfg.DataDir = dir })
	coll2 := c2.Database("d").Collection("c")
	resumed := watch(t, coll2, nil, options.ChangeStream().SetResumeAfter(tok))
	if _, err := coll2.InsertOne(ctx, bson.D{{Key: "_id", Value: 9}}); err != nil {
		t.Fatal(err)
	}
	var got []int32
	for range 3 {
		got = append(got, next(t, resumed).Lookup("documentKey", "_id").Int32())
	}
	if want := []int32{1, 2, 9}; !slices.Equal(got, want) {
		t.Fatalf("after restart: got %v, want %v", got, want)
	}
}

// A token whose history was trimmed before a restart still gets 286
// ChangeStreamHistoryLost after it, and one still retained resumes.
func TestChangeStreamHistoryLostAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	small := func(cfg *Config) { cfg.DataDir = dir; cfg.OplogBytes = 64 << 10 }
	s, c := csServer(t, small)
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: -1}}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	lost := slices.Clone(cs.ResumeToken())
	pad := make([]byte, 4096)
	for i := range 100 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: pad}}); err != nil {
			t.Fatal(err)
		}
	}
	kept := watch(t, coll, nil)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1000}}); err != nil {
		t.Fatal(err)
	}
	next(t, kept)
	recent := slices.Clone(kept.ResumeToken())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1001}}); err != nil {
		t.Fatal(err)
	}
	cs.Close(ctx)
	kept.Close(ctx)
	c.Disconnect(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	_, c2 := csServer(t, small)
	coll2 := c2.Database("d").Collection("c")
	_, err := coll2.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(lost))
	requireCode(t, err, 286, "NonResumableChangeStreamError")
	resumed := watch(t, coll2, nil, options.ChangeStream().SetResumeAfter(recent))
	if id := next(t, resumed).Lookup("documentKey", "_id").Int32(); id != 1001 {
		t.Fatalf("resumed at _id %d, want 1001", id)
	}
}

// A driver's change stream lives through a server restart on the same
// address and data directory: the driver resumes with its cached token
// and misses nothing written before or after the restart.
func TestChangeStreamSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := New(Config{Addr: "127.0.0.1:0", DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").SetTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	ctx := t.Context()
	coll := c.Database("d").Collection("c")
	cs := watch(t, coll, nil, options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	next(t, cs)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := New(Config{Addr: addr, DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err := s2.Start(); err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	defer s2.Close()
	var got []int32
	for len(got) < 2 {
		got = append(got, next(t, cs).Lookup("documentKey", "_id").Int32())
		if len(got) == 1 {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 3}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("after the restart the stream gave %v, want [2 3]", got)
	}
}
