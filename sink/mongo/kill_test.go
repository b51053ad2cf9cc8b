package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"

	"github.com/tide-cdc/tide/internal/testenv"
)

func writeFile(t *testing.T, dir, text string) string {
	t.Helper()
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// snapshotRead runs read in a snapshot transaction on c, so that what it
// reads is one point in time: a transaction a killed tide had sent its
// commit for may land at any moment.
func snapshotRead(t *testing.T, c *mongo.Client, read func(ctx context.Context) error) {
	t.Helper()
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	if err := sess.StartTransaction(options.Transaction().SetReadConcern(readconcern.Snapshot())); err != nil {
		t.Fatal(err)
	}
	ctx := mongo.NewSessionContext(t.Context(), sess)
	if err := read(ctx); err != nil {
		t.Fatal(err)
	}
	_ = sess.AbortTransaction(ctx)
}

// checkpointSeq reads the seq of a generate pipeline's checkpoint in
// tide_checkpoints; 0 if none.
func checkpointSeq(ctx context.Context, c *mongo.Client, pipeline string) (int64, error) {
	var doc struct {
		Checkpoint string `bson:"checkpoint"`
	}
	err := c.Database("tide").Collection("tide_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: pipeline}}).Decode(&doc)
	if err == mongo.ErrNoDocuments || (err == nil && doc.Checkpoint == "") {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var cp struct {
		Source struct {
			Seq int64 `json:"seq"`
		} `json:"source"`
	}
	if err := jsonUnmarshal(doc.Checkpoint, &cp); err != nil {
		return 0, err
	}
	return cp.Source.Seq, nil
}

// TestSIGKILLGenerateAppend kills `tide run` (generate → MongoDB append,
// checkpoint: sink) six times at random moments: after each kill the
// target holds exactly the events up to the checkpoint, once each; at the
// end exactly N.
func TestSIGKILLGenerateAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and runs it 7 times")
	}
	const count, kills = 30_000, 6
	bin := testenv.TideBinary(t)
	target := testenv.MongoWire(t)
	c := testenv.MongoClient(t, target.URI())
	dir := t.TempDir()
	file := writeFile(t, dir, fmt.Sprintf(`name: gen
source:
  generate: {count: %d, payload_bytes: 16}
sink:
  mongo: {uri: "%s", database: lake, collection: events, mode: append}
checkpoint: sink
data_dir: %s
batch: {max_records: 500}
`, count, target.URI(), filepath.Join(dir, "data")))

	check := func(when string) int64 {
		t.Helper()
		var cp, docs int64
		snapshotRead(t, c, func(ctx context.Context) error {
			var err error
			if cp, err = checkpointSeq(ctx, c, "gen"); err != nil {
				return err
			}
			docs, err = c.Database("lake").Collection("events").CountDocuments(ctx, bson.D{})
			return err
		})
		var distinct []int64
		if err := c.Database("lake").Collection("events").Distinct(t.Context(), "_full_document.seq", bson.D{{Key: "_full_document.seq", Value: bson.D{{Key: "$lte", Value: cp}}}}).Decode(&distinct); err != nil {
			t.Fatal(err)
		}
		if docs != cp || int64(len(distinct)) != cp {
			t.Fatalf("%s: checkpoint seq %d, but %d documents, %d distinct events up to it: want all equal", when, cp, docs, len(distinct))
		}
		return cp
	}
	var last int64
	for i := range int64(kills) {
		p := testenv.StartTide(t, bin, file, "warn")
		span := int64(count / (kills + 1))
		want := max(last+1, i*span+rand.Int64N(span))
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			seq, _ := checkpointSeq(t.Context(), c, "gen")
			if seq >= want {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
		p.KillAfter(t, 0)
		last = check(fmt.Sprintf("after kill %d", i+1))
		if last >= count {
			t.Fatalf("the run finished before kill %d: make it longer", i+1)
		}
		t.Logf("kill %d: checkpoint at seq %d", i+1, last)
	}
	p := testenv.StartTide(t, bin, file, "warn")
	if err := p.Wait(); err != nil {
		t.Fatalf("final run: %v\n%s", err, p.Stderr())
	}
	if got := check("after the final run"); got != count {
		t.Fatalf("final checkpoint seq %d, want %d", got, count)
	}
}

// TestSIGKILLMirror: MongoDB (embedded server A) → MongoDB (embedded
// server B), mirror mode, checkpoint: sink, with a random workload of
// inserts, updates, replaces and deletes on two collections of A while
// `tide run` is killed six times. At the end B's collections equal A's,
// document for document, and B's checkpoint names A's last change.
func TestSIGKILLMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and runs it 7 times")
	}
	const kills = 6
	bin := testenv.TideBinary(t)
	a := testenv.MongoWire(t)
	b := testenv.MongoWire(t)
	ca, cb := testenv.MongoClient(t, a.URI()), testenv.MongoClient(t, b.URI())
	colls := []string{"orders", "users"}
	for _, name := range colls { // the source admits existing collections
		if err := ca.Database("shop").CreateCollection(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	file := writeFile(t, dir, fmt.Sprintf(`name: mirror
source:
  mongo: {uri: "%s", database: shop, collections: [orders, users], full_document: update_lookup}
sink:
  mongo: {uri: "%s", mode: mirror}
checkpoint: sink
data_dir: %s
batch: {max_records: 200, commit_interval: 50ms}
`, a.URI(), b.URI(), filepath.Join(dir, "data")))

	// The workload: random changes to ids 0-299 of both collections.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var writes int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for n := 0; ctx.Err() == nil; n++ {
			coll := ca.Database("shop").Collection(colls[r.IntN(len(colls))])
			id := r.IntN(300)
			var err error
			switch r.IntN(4) {
			case 0:
				_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
			case 1:
				_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			default:
				_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: n}, {Key: "pad", Value: strings.Repeat("x", r.IntN(200))}},
					options.Replace().SetUpsert(true))
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("workload: %v", err)
				return
			}
			writes++
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for i := range kills {
		p := testenv.StartTide(t, bin, file, "warn")
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		p.KillAfter(t, 0)
		t.Logf("kill %d", i+1)
	}
	stop()
	wg.Wait()
	t.Logf("%d writes to A", writes)

	// A's last change, then a run that catches up with it.
	var last bson.Raw
	if err := ca.Database("local").Collection("oplog.rs").FindOne(t.Context(), bson.D{{Key: "ns", Value: bson.D{{Key: "$regex", Value: "^shop\\."}}}},
		options.FindOne().SetSort(bson.D{{Key: "$natural", Value: -1}})).Decode(&last); err != nil {
		t.Fatalf("read A's oplog: %v", err)
	}
	lastTS, lastI, _ := last.Lookup("ts").TimestampOK()
	p := testenv.StartTide(t, bin, file, "warn")
	deadline := time.Now().Add(20 * time.Second)
	for {
		equal := true
		for _, name := range colls {
			if !sameDocuments(t, ca, cb, "shop", name) {
				equal = false
			}
		}
		if equal && checkpointAtLeast(t, b.URI(), lastTS, lastI) {
			break
		}
		if time.Now().After(deadline) {
			for _, name := range colls {
				t.Logf("shop.%s: %d documents in A, %d in B, equal %v", name, count(t, ca, "shop", name), count(t, cb, "shop", name), sameDocuments(t, ca, cb, "shop", name))
			}
			t.Fatalf("B did not catch up with A in 20 s: A's last change at %d.%d, B's checkpoint %+v\n%s", lastTS, lastI, checkpointOf(t, b.URI(), "mirror"), p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.KillAfter(t, 0)
	for _, name := range colls {
		if !sameDocuments(t, ca, cb, "shop", name) {
			t.Errorf("shop.%s differs between A and B", name)
		}
	}
}

// sameDocuments reports whether db.coll holds the same documents on both
// servers, byte for byte.
func sameDocuments(t *testing.T, ca, cb *mongo.Client, db, coll string) bool {
	t.Helper()
	read := func(c *mongo.Client) map[string]string {
		cur, err := c.Database(db).Collection(coll).Find(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		defer cur.Close(t.Context())
		out := map[string]string{}
		for cur.Next(t.Context()) {
			out[cur.Current.Lookup("_id").String()] = string(cur.Current)
		}
		return out
	}
	da, db2 := read(ca), read(cb)
	if len(da) != len(db2) {
		return false
	}
	for k, v := range da {
		if db2[k] != v {
			return false
		}
	}
	return true
}

// checkpointAtLeast reports whether B's checkpoint of the mirror pipeline
// is at or after cluster time (ts, i).
func checkpointAtLeast(t *testing.T, uri string, ts, i uint32) bool {
	t.Helper()
	cp := checkpointOf(t, uri, "mirror")
	if cp == nil {
		return false
	}
	at, ok := clusterTimeOf(string(cp.Source))
	return ok && (at.T > ts || at.T == ts && at.I >= i)
}

// clusterTimeOf reads the cluster time of a MongoDB source position: its
// resume token's _data is a key string that starts with 0x82 and the
// timestamp's seconds and increment, big-endian, as mongod's does.
func clusterTimeOf(pos string) (bson.Timestamp, bool) {
	var p struct {
		ResumeToken struct {
			Data string `json:"_data"`
		} `json:"resume_token"`
	}
	if err := json.Unmarshal([]byte(pos), &p); err != nil || len(p.ResumeToken.Data) < 18 || !strings.HasPrefix(p.ResumeToken.Data, "82") {
		return bson.Timestamp{}, false
	}
	tv, err1 := strconv.ParseUint(p.ResumeToken.Data[2:10], 16, 32)
	iv, err2 := strconv.ParseUint(p.ResumeToken.Data[10:18], 16, 32)
	return bson.Timestamp{T: uint32(tv), I: uint32(iv)}, err1 == nil && err2 == nil
}

// TestSIGKILLJetStreamAppend: NATS JetStream → MongoDB append, with
// `tide run` killed three times while messages arrive: every message is
// in the target once.
func TestSIGKILLJetStreamAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds tide and runs it 4 times")
	}
	const rounds, perRound = 4, 3000
	bin := testenv.TideBinary(t)
	ns := testenv.NATS(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	target := testenv.MongoWire(t)
	c := testenv.MongoClient(t, target.URI())
	dir := t.TempDir()
	file := writeFile(t, dir, fmt.Sprintf(`name: js
source:
  nats: {servers: [%s], stream: ORDERS, consumer: tide, ack_wait: 2s}
sink:
  mongo: {uri: "%s", database: lake, collection: orders, mode: append}
checkpoint: sink
data_dir: %s
batch: {max_records: 500}
`, ns.ClientURL(), target.URI(), filepath.Join(dir, "data")))
	publish := func(round int) {
		for i := range perRound {
			n := round*perRound + i
			if _, err := js.PublishAsync("orders.created", []byte(`{"n":`+strconv.Itoa(n)+`}`)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Second):
			t.Fatal("publish: no acks in 10 s")
		}
	}
	for round := range rounds - 1 {
		p := testenv.StartTide(t, bin, file, "warn")
		publish(round)
		time.Sleep(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		p.KillAfter(t, 0)
	}
	p := testenv.StartTide(t, bin, file, "warn")
	publish(rounds - 1)
	const total = rounds * perRound
	deadline := time.Now().Add(20 * time.Second)
	for count(t, c, "lake", "orders") < total && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	p.KillAfter(t, 0)
	if n := count(t, c, "lake", "orders"); n != total {
		t.Fatalf("lake.orders holds %d documents, want %d\n%s", n, total, p.Stderr())
	}
	var ns2 []int64
	if err := c.Database("lake").Collection("orders").Distinct(t.Context(), "_full_document.n", bson.D{}).Decode(&ns2); err != nil {
		t.Fatal(err)
	}
	if len(ns2) != total {
		t.Fatalf("%d distinct messages, want %d: some are there twice", len(ns2), total)
	}
}
