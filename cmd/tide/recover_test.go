package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/jackc/pgx/v5"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// outLine is a line of the file sink's output.
type outLine struct {
	Op  string `json:"_op"`
	Key *struct {
		ID int `json:"_id"`
	} `json:"_document_key"`
	Doc   json.RawMessage `json:"_full_document"`
	Extra struct {
		Resnapshot string `json:"resnapshot"`
	} `json:"_extra"`
}

func readOut(t *testing.T, path string) []outLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []outLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// replay applies the output in order and returns the documents it ends
// with, by _id. A re-snapshot's begin line makes every document stale
// until it is copied again; its end line drops the stale ones: they were
// deleted during the gap.
func replay(lines []outLine) map[int]string {
	docs := map[int]string{}
	stale := map[int]bool{}
	for _, l := range lines {
		switch {
		case l.Op == "snapshot" && l.Extra.Resnapshot == "begin":
			for id := range docs {
				stale[id] = true
			}
		case l.Op == "snapshot" && l.Extra.Resnapshot == "end":
			for id := range stale {
				delete(docs, id)
			}
			clear(stale)
		case l.Op == "delete":
			delete(docs, l.Key.ID)
			delete(stale, l.Key.ID)
		default:
			docs[l.Key.ID] = string(l.Doc)
			delete(stale, l.Key.ID)
		}
	}
	return docs
}

func collectionDocsByID(t *testing.T, coll *mongo.Collection) map[int]string {
	t.Helper()
	cur, err := coll.Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(context.Background(), &docs); err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, d := range docs {
		j, err := bson.MarshalExtJSON(d, false, false)
		if err != nil {
			t.Fatal(err)
		}
		out[int(d.Lookup("_id").AsInt64())] = string(j)
	}
	return out
}

// runUntil starts tide run, waits until the output holds a line that
// until accepts, then stops it with SIGTERM and returns its stderr.
func runUntil(t *testing.T, dir, cfg, out string, until func([]outLine) bool) string {
	t.Helper()
	return runWhile(t, tideCmd(t, dir, "run", "-f", cfg), func() bool {
		_, err := os.Stat(out)
		return err == nil && until(readOut(t, out))
	})
}

// runWhile starts cmd (a tide run), waits until done says so, then stops
// it with SIGTERM and returns its stderr.
func runWhile(t *testing.T, cmd *exec.Cmd, done func() bool) string {
	t.Helper()
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if done() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tide run: the output did not get there within 20s\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a commit or two
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tide run: %v\n%s", err, stderr.String())
	}
	return stderr.String()
}

func insertIDs(t *testing.T, coll *mongo.Collection, ids ...int) {
	t.Helper()
	for _, id := range ids {
		if _, err := coll.InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}, {Key: "v", Value: fmt.Sprint("doc", id)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoverLostHistory: a pipeline stopped past a tiny oplog window
// fails with 286, naming both recovery commands; tide snapshot brings the
// output back to equal the collection; tide checkpoint set --cluster-time
// resumes exactly after that time.
func TestRecoverLostHistory(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 })
	client := testenv.MongoClient(t, srv.URI())
	ctx := context.Background()
	coll := client.Database("shop").Collection("orders")
	insertIDs(t, coll, 1, 2, 3, 4)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: recover
source:
  mongo: {uri: %q, database: shop, collection: orders, max_await: 100ms, oplog_poll: 100ms}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`, srv.URI()))
	runUntil(t, dir, cfg, out, func(l []outLine) bool { return len(l) >= 4 })

	// While it is stopped: a delete, an update, an insert, and enough
	// writes elsewhere to roll the oplog past the checkpoint.
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "changed"}}}}); err != nil {
		t.Fatal(err)
	}
	insertIDs(t, coll, 5)
	pad := client.Database("shop").Collection("pad")
	for i := range 300 {
		if _, err := pad.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("y", 200)}}); err != nil {
			t.Fatal(err)
		}
	}

	logs, err := runTide(t, dir, "run", "-f", cfg)
	if err == nil {
		t.Fatalf("tide run past the oplog window succeeded:\n%s", logs)
	}
	for _, want := range []string{"change history lost", "(ChangeStreamHistoryLost)", "tide snapshot -f FILE", "tide checkpoint set -f FILE --cluster-time T"} {
		if !strings.Contains(logs, want) {
			t.Errorf("tide run past the oplog window does not say %q:\n%s", want, logs)
		}
	}

	// tide snapshot: refused without a terminal, then confirmed.
	if got, err := runTide(t, dir, "snapshot", "-f", cfg); err == nil || !strings.Contains(got, "not a terminal: run it again with --yes") {
		t.Errorf("tide snapshot without a terminal and without --yes: %v\n%s", err, got)
	}
	got, err := runTide(t, dir, "snapshot", "-f", cfg, "--yes")
	if err != nil || !strings.Contains(got, "to:   a re-snapshot") || !strings.Contains(got, "from: after resume token") {
		t.Fatalf("tide snapshot --yes: %v\n%s", err, got)
	}
	runUntil(t, dir, cfg, out, func(l []outLine) bool {
		return slices.ContainsFunc(l, func(l outLine) bool { return l.Extra.Resnapshot == "end" })
	})
	lines := readOut(t, out)
	want := collectionDocsByID(t, coll)
	if got := replay(lines); !equalDocs(got, want) {
		t.Errorf("after tide snapshot the output replays to\n%v\nwant the collection\n%v", got, want)
	}

	// tide checkpoint set --cluster-time: resume exactly after the insert of 11.
	insertIDs(t, coll, 10, 11, 12)
	var e struct {
		TS bson.Timestamp `bson:"ts"`
	}
	if err := client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{{Key: "o._id", Value: 11}, {Key: "ns", Value: "shop.orders"}}).Decode(&e); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"yesterday", "2026-12-02T01:20:00.5Z"} {
		if got, err := runTide(t, dir, "checkpoint", "set", "-f", cfg, "--cluster-time", bad, "--yes"); err == nil || !strings.Contains(got, "--cluster-time: cluster time") {
			t.Errorf("checkpoint set --cluster-time %q: %v\n%s", bad, err, got)
		}
	}
	at := fmt.Sprintf("Timestamp(%d, %d)", e.TS.T, e.TS.I)
	if got, err := runTide(t, dir, "checkpoint", "set", "-f", cfg, "--cluster-time", at); err == nil || !strings.Contains(got, "--yes") {
		t.Errorf("checkpoint set without a terminal and without --yes: %v\n%s", err, got)
	}
	got, err = runTide(t, dir, "checkpoint", "set", "-f", cfg, "--cluster-time", at, "--yes")
	if err != nil || !strings.Contains(got, "to:   the first change after cluster time "+at) {
		t.Fatalf("checkpoint set --cluster-time %s: %v\n%s", at, err, got)
	}
	before := len(lines)
	runUntil(t, dir, cfg, out, func(l []outLine) bool { return len(l) > before })
	rest := readOut(t, out)[before:]
	if len(rest) != 1 || rest[0].Op != "insert" || rest[0].Key.ID != 12 {
		t.Errorf("after checkpoint set --cluster-time %s the output continued with %d lines (%s), want only the insert of 12", at, len(rest), fmt.Sprint(rest))
	}
}

// TestResnapshotPostgresMirror: tide snapshot with the checkpoint in the
// PostgreSQL sink (checkpoint: sink) rewrites the checkpoint row, and the
// mirror then equals the collection: the rows of documents deleted during
// the gap go.
func TestResnapshotPostgresMirror(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 })
	client := testenv.MongoClient(t, srv.URI())
	ctx := context.Background()
	coll := client.Database("shop").Collection("orders")
	insertIDs(t, coll, 1, 2, 3, 4)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: resnap-pg
source:
  mongo: {uri: %q, database: shop, collection: orders, full_document: update_lookup, max_await: 100ms}
sink:
  postgres: {dsn: "${PG_DSN}", table: resnap_orders, mode: mirror, columns: document}
checkpoint: sink
batch: {commit_interval: 10ms}
`, srv.URI()))
	tide := func(args ...string) *exec.Cmd {
		c := tideCmd(t, dir, args...)
		c.Env = append(c.Env, "PG_DSN="+dsn)
		return c
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	mirror := func() map[int]string {
		rows, err := conn.Query(ctx, `SELECT (doc->>'_id')::int, doc::text FROM resnap_orders WHERE NOT _tide_deleted`)
		if err != nil {
			return nil // not created yet
		}
		out := map[int]string{}
		for rows.Next() {
			var id int
			var doc string
			if err := rows.Scan(&id, &doc); err != nil {
				t.Fatal(err)
			}
			out[id] = doc
		}
		if rows.Err() != nil {
			return nil
		}
		return out
	}
	runWhile(t, tide("run", "-f", cfg), func() bool { return len(mirror()) == 4 })

	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: "changed"}}}}); err != nil {
		t.Fatal(err)
	}
	insertIDs(t, coll, 5)
	pad := client.Database("shop").Collection("pad")
	for i := range 300 {
		if _, err := pad.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("y", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := tide("run", "-f", cfg).CombinedOutput(); err == nil || !strings.Contains(string(out), "tide snapshot -f FILE") {
		t.Fatalf("tide run past the oplog window: %v\n%s", err, out)
	}
	if out, err := tide("snapshot", "-f", cfg, "--yes").CombinedOutput(); err != nil {
		t.Fatalf("tide snapshot --yes: %v\n%s", err, out)
	}
	want := collectionDocsByID(t, coll)
	var got map[int]string
	runWhile(t, tide("run", "-f", cfg), func() bool {
		got = mirror()
		return equalDocs(got, want)
	})
}

func equalDocs(a, b map[int]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		var x, y any
		if json.Unmarshal([]byte(v), &x) != nil || json.Unmarshal([]byte(b[k]), &y) != nil || fmt.Sprint(x) != fmt.Sprint(y) {
			return false
		}
	}
	return true
}
