package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/testenv"
)

// isnapLine is a line of the file sink's output, with its namespace.
type isnapLine struct {
	Op  string `json:"_op"`
	NS  string `json:"_namespace"`
	Key *struct {
		ID int64 `json:"_id"`
	} `json:"_document_key"`
	Doc *struct {
		V int64 `json:"v"`
	} `json:"_full_document"`
}

func readIsnapLines(t *testing.T, path string) []isnapLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []isnapLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l isnapLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a torn last line, truncated by the next run
		}
		out = append(out, l)
	}
	return out
}

// checkSnapshotOrder requires, for every key, that no line carries an
// older version than a line before it, and that nothing follows its
// delete (the writer never brings a deleted _id back): in particular no
// snapshot row of a key comes after a later change of that key. It
// returns the documents the lines end with, by namespace and _id, and how
// many snapshot rows there were.
func checkSnapshotOrder(t *testing.T, lines []isnapLine) (map[string]int64, int) {
	t.Helper()
	v := map[string]int64{}
	deleted := map[string]bool{}
	snaps, bad := 0, 0
	for i, l := range lines {
		if l.Key == nil {
			continue
		}
		k := fmt.Sprintf("%s %d", l.NS, l.Key.ID)
		if deleted[k] {
			if bad++; bad < 5 {
				t.Errorf("line %d: %s of %s after its delete", i+1, l.Op, k)
			}
		}
		switch {
		case l.Op == "delete":
			deleted[k] = true
			delete(v, k)
		case l.Doc != nil:
			if old, ok := v[k]; ok && l.Doc.V < old {
				if bad++; bad < 5 {
					t.Errorf("line %d: %s of %s with v %d after v %d", i+1, l.Op, k, l.Doc.V, old)
				}
			}
			v[k] = l.Doc.V
			if l.Op == "snapshot" {
				snaps++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d lines out of order", bad)
	}
	return v, snaps
}

// versions returns the v of every document of the collections, by
// namespace and _id.
func versions(t *testing.T, db *mongo.Database, colls ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, c := range colls {
		cur, err := db.Collection(c).Find(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(t.Context()) {
			id, _ := cur.Current.Lookup("_id").AsInt64OK()
			v, _ := cur.Current.Lookup("v").AsInt64OK()
			out[fmt.Sprintf("%s.%s %d", db.Name(), c, id)] = v
		}
		cur.Close(context.Background())
	}
	return out
}

// isnapWriter writes until stopped: $set v to a global counter, deletes
// and inserts, over the keys of shop.a and shop.b.
type isnapWriter struct {
	db   *mongo.Database
	n    int64
	v    atomic.Int64
	stop chan struct{}
	done chan error
}

func (w *isnapWriter) run(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 29))
	next := int64(10_000_000)
	ctx := context.Background()
	for {
		select {
		case <-w.stop:
			w.done <- nil
			return
		default:
		}
		coll := w.db.Collection([]string{"a", "b"}[rng.IntN(2)])
		id := rng.Int64N(w.n)
		v := w.v.Add(1)
		var err error
		switch r := rng.IntN(20); {
		case r < 15:
			_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}})
		case r < 17:
			_, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		default:
			next++
			_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: next}, {Key: "v", Value: v}})
		}
		if err != nil {
			w.done <- err
			return
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
	}
}

// apiSnapshots reads GET /api/snapshots of the pipeline whose data
// directory is dataDir; nil when it does not answer.
func apiSnapshots(t *testing.T, dataDir string) []cdc.SnapshotInfo {
	t.Helper()
	addr := readHTTPAddr(dataDir)
	if addr == "" {
		return nil
	}
	resp, err := http.Get("http://" + addr + "/api/snapshots")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []cdc.SnapshotInfo
	if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
		t.Fatalf("GET /api/snapshots: %s %s", resp.Status, b)
	}
	return out
}

// TestIncrementalSnapshotSIGKILL is issue 29's end-to-end test: with a
// writer running the whole time, an incremental snapshot of two
// collections into a PostgreSQL mirror, a MongoDB-sink mirror and an
// append-mode file, asked for with tide snapshot --collection from the
// running pipelines, each tide run SIGKILLed 5 times during it. At the
// end each mirror equals its source, document for document, and in the
// file no snapshot row of a key comes after a later change of that key.
func TestIncrementalSnapshotSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("copies 2 × 10,000 documents through three pipelines of the binary, SIGKILLed 5 times; skipped with -short")
	}
	t.Parallel()
	const n, kills = 10_000, 5
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	srv := testenv.MongoWire(t)
	dsn := testenv.Postgres(t)
	client := testenv.MongoClient(t, srv.URI())
	shop := client.Database("shop")
	for _, c := range []string{"a", "b"} {
		docs := make([]any, 0, n)
		for i := range int64(n) {
			docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "v", Value: int64(0)}, {Key: "pad", Value: strings.Repeat("p", 40)}})
		}
		if _, err := shop.Collection(c).InsertMany(t.Context(), docs); err != nil {
			t.Fatal(err)
		}
	}
	// The pipelines start from now: the documents already there reach
	// them only through the incremental snapshot.
	source := fmt.Sprintf(`source:
  mongo:
    uri: %q
    database: shop
    collections: ["a", "b"]
    snapshot: never
    full_document: update_lookup
    max_await: 100ms
batch: {max_records: 200, commit_interval: 20ms}
`, srv.URI())
	type target struct {
		name, dir, cfg string
		env            []string
		run            *e2eRun
	}
	mk := func(name, sink string, env ...string) *target {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := writePipeline(t, dir, fmt.Sprintf("name: %s\ndata_dir: %s\n%s%s", name, filepath.Join(dir, "data"), source, sink))
		return &target{name: name, dir: dir, cfg: cfg, env: env}
	}
	targets := []*target{
		mk("file", "sink:\n  file: {path: ./out/all.jsonl}\n"),
		mk("pg", "sink:\n  postgres: {dsn: \"${PG_DSN}\", table: \"{coll}\", mode: mirror, soft_delete: false, columns: document}\ncheckpoint: sink\n", "PG_DSN="+dsn),
		mk("mongo", fmt.Sprintf("sink:\n  mongo: {uri: %q, database: mirror, mode: mirror}\ncheckpoint: sink\n", srv.URI())),
	}
	start := func(tg *target) {
		tg.run = startRunArgs(t, tg.name, tg.dir, tg.cfg, []string{"--http-addr", "127.0.0.1:0"}, tg.env...)
	}
	dataDir := func(tg *target) string { return filepath.Join(tg.dir, "data") }
	for _, tg := range targets {
		start(tg)
	}
	for _, tg := range targets {
		waitFor(t, time.Minute, tg.name+": streaming", func() bool {
			return readHTTPAddr(dataDir(tg)) != "" && apiSnapshots(t, dataDir(tg)) != nil
		}, tg.run)
	}
	w := &isnapWriter{db: shop, n: n, stop: make(chan struct{}), done: make(chan error, 1)}
	go w.run(seed) // stopped below, or by the cleanup
	stopWriter := func() {
		select {
		case <-w.stop:
			return
		default:
		}
		close(w.stop)
		if err := <-w.done; err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	t.Cleanup(stopWriter)
	time.Sleep(200 * time.Millisecond)

	// Ask each running pipeline.
	for _, tg := range targets {
		cmd := tideCmd(t, tg.dir, "snapshot", "-f", tg.cfg, "--collection", "shop.a", "--collection", "shop.b", "--chunk", "25")
		cmd.Env = append(cmd.Env, tg.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "requested from the running pipeline") {
			t.Fatalf("%s: tide snapshot: %v\n%s", tg.name, err, out)
		}
		// A second request for a collection being copied is refused.
		cmd = tideCmd(t, tg.dir, "snapshot", "-f", tg.cfg, "--collection", "shop.b")
		cmd.Env = append(cmd.Env, tg.env...)
		out, err = cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "already being copied by snapshot 1") {
			t.Fatalf("%s: a second tide snapshot of shop.b: %v\n%s", tg.name, err, out)
		}
	}
	running := func(tg *target) (cdc.SnapshotInfo, bool) {
		list := apiSnapshots(t, dataDir(tg))
		if len(list) != 1 {
			return cdc.SnapshotInfo{}, false
		}
		return list[0], true
	}
	for i := range kills {
		for _, tg := range targets {
			in, _ := running(tg)
			before := in.DoneDocuments
			waitFor(t, time.Minute, fmt.Sprintf("%s: snapshot progress in run %d", tg.name, i+1), func() bool {
				in, ok := running(tg)
				return ok && (in.DoneDocuments > before || in.State != cdc.SnapshotRunning)
			}, tg.run)
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // any moment will do
		var states []string
		for _, tg := range targets {
			in, _ := running(tg)
			states = append(states, fmt.Sprintf("%s %s %d/%d", tg.name, in.State, in.DoneDocuments, in.TotalDocuments))
			if in.State != cdc.SnapshotRunning {
				t.Errorf("kill %d: %s: the snapshot is %s already: make it longer", i+1, tg.name, in.State)
			}
			tg.run.kill()
		}
		t.Logf("kill %d: %s", i+1, strings.Join(states, ", "))
		for _, tg := range targets {
			start(tg)
		}
		for _, tg := range targets {
			waitFor(t, time.Minute, tg.name+": back", func() bool { _, ok := running(tg); return ok }, tg.run)
		}
	}
	for _, tg := range targets {
		waitFor(t, 3*time.Minute, tg.name+": snapshot done", func() bool {
			in, ok := running(tg)
			return ok && in.State == cdc.SnapshotDone
		}, tg.run)
		in, _ := running(tg)
		t.Logf("%s: %+v", tg.name, in)
	}
	stopWriter()
	// The last change: every target has it once it holds this document.
	final := int64(20_000_000)
	if _, err := shop.Collection("b").InsertOne(t.Context(), bson.D{{Key: "_id", Value: final}, {Key: "v", Value: w.v.Add(1)}}); err != nil {
		t.Fatal(err)
	}
	want := versions(t, shop, "a", "b")
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	have := map[string]func() bool{
		"file": func() bool {
			for _, l := range readIsnapLines(t, filepath.Join(targets[0].dir, "out", "all.jsonl")) {
				if l.Key != nil && l.Key.ID == final {
					return true
				}
			}
			return false
		},
		"pg": func() bool {
			var c int
			err := conn.QueryRow(t.Context(), `SELECT count(*) FROM b WHERE doc->>'_id' = $1`, fmt.Sprint(final)).Scan(&c)
			return err == nil && c == 1
		},
		"mongo": func() bool {
			c, err := client.Database("mirror").Collection("b").CountDocuments(t.Context(), bson.D{{Key: "_id", Value: final}})
			return err == nil && c == 1
		},
	}
	for _, tg := range targets {
		waitFor(t, time.Minute, tg.name+": the last change", have[tg.name], tg.run)
		tg.run.stop()
	}

	// The file: in order, and replayed, equal to the collections.
	got, snaps := checkSnapshotOrder(t, readIsnapLines(t, filepath.Join(targets[0].dir, "out", "all.jsonl")))
	if snaps < 2*n/2 {
		t.Errorf("file: %d snapshot rows, want about %d", snaps, 2*n)
	}
	sameVersions(t, "file", got, want)
	// The MongoDB mirror.
	sameVersions(t, "mongo mirror", versionsAs(versions(t, client.Database("mirror"), "a", "b"), "mirror.", "shop."), want)
	// The PostgreSQL mirror.
	pgv := map[string]int64{}
	for _, c := range []string{"a", "b"} {
		rows, err := conn.Query(t.Context(), `SELECT (doc->>'_id')::bigint, coalesce((doc->>'v')::bigint, 0) FROM `+c)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				t.Fatal(err)
			}
			pgv[fmt.Sprintf("shop.%s %d", c, id)] = v
		}
		rows.Close()
	}
	sameVersions(t, "postgres mirror", pgv, want)
	for _, c := range []string{"a", "b"} {
		docs, rows := collectionDocs(t, shop.Collection(c)), tableDocs(t, conn, c)
		for id, d := range docs {
			if rows[id] != d {
				t.Errorf("postgres %s _id %s: row %s, document %s", c, id, rows[id], d)
				break
			}
		}
	}
}

func versionsAs(m map[string]int64, from, to string) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[strings.Replace(k, from, to, 1)] = v
	}
	return out
}

func sameVersions(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	bad := 0
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s has v %d (present %v), the source %d", what, k, g, ok, v)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s is not in the source", what, k)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d differences (%d documents, the source %d)", what, bad, len(got), len(want))
	}
}

// TestIncrementalSnapshotWhileStopped: tide snapshot --collection on a
// stopped pipeline (stopped cleanly, or SIGKILLed, which leaves its
// recorded address behind) records the request in the checkpoint, and the
// next run copies the collection, filtered. Bad requests are refused
// before anything is written.
func TestIncrementalSnapshotWhileStopped(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	coll := client.Database("shop").Collection("orders")
	docs := make([]any, 0, 500)
	for i := range 500 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "status", Value: []string{"open", "closed"}[i%2]}})
	}
	if _, err := coll.InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: stopped
data_dir: %s
source:
  mongo: {uri: %q, database: shop, collection: orders, snapshot: never, max_await: 100ms}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 20ms}
`, filepath.Join(dir, "data"), srv.URI()))
	out := filepath.Join(dir, "out.jsonl")
	// No checkpoint yet: refused.
	if o, err := runTide(t, dir, "snapshot", "-f", cfg, "--collection", "shop.orders"); err == nil || !strings.Contains(o, "no checkpoint yet") {
		t.Fatalf("snapshot before the first run: %v\n%s", err, o)
	}
	run := startRunArgs(t, "stopped", dir, cfg, []string{"--http-addr", "127.0.0.1:0"})
	waitFor(t, time.Minute, "streaming", func() bool {
		_, err := os.Stat(checkpoint.File(filepath.Join(dir, "data"), "stopped"))
		return err == nil && streaming(t, dir, cfg)
	}, run)
	run.kill() // the recorded address stays behind

	refused := map[string]struct {
		args  []string
		words string
	}{
		"not captured":    {[]string{"--collection", "shop.other"}, "shop.other is not captured"},
		"filter not JSON": {[]string{"--collection", "shop.orders", "--filter", `{"status":`}, "is not a JSON object"},
		"filter array":    {[]string{"--collection", "shop.orders", "--filter", `[1]`}, "is not a JSON object"},
		"filter ext JSON": {[]string{"--collection", "shop.orders", "--filter", `{"_id": {"$numberInt": "x"}}`}, "filter is not Extended JSON"},
		"chunk":           {[]string{"--collection", "shop.orders", "--chunk", "-5"}, "--chunk -5"},
		"no collection":   {[]string{"--filter", `{"status": "open"}`}, "need --collection"},
	}
	for name, c := range refused {
		o, err := runTide(t, dir, append([]string{"snapshot", "-f", cfg}, c.args...)...)
		if err == nil || !strings.Contains(o, c.words) {
			t.Errorf("%s: %v, want refused with %q:\n%s", name, err, c.words, o)
		}
	}
	o, err := runTide(t, dir, "snapshot", "-f", cfg, "--collection", "shop.orders", "--filter", `{"status": "open"}`, "--chunk", "32")
	if err != nil || !strings.Contains(o, "recorded in its checkpoint") {
		t.Fatalf("snapshot of a stopped pipeline: %v\n%s", err, o)
	}
	if o, err := runTide(t, dir, "snapshot", "-f", cfg, "--collection", "shop.orders"); err == nil || !strings.Contains(o, "already being copied") {
		t.Fatalf("a second request: %v\n%s", err, o)
	}
	run = startRunArgs(t, "stopped", dir, cfg, []string{"--http-addr", "127.0.0.1:0"})
	waitFor(t, time.Minute, "snapshot done", func() bool {
		list := apiSnapshots(t, filepath.Join(dir, "data"))
		return len(list) == 1 && list[0].State == cdc.SnapshotDone
	}, run)
	run.stop()
	seen := map[int64]bool{}
	for _, l := range readIsnapLines(t, out) {
		if l.Op != "snapshot" {
			continue
		}
		if l.Key.ID%2 != 0 || seen[l.Key.ID] {
			t.Errorf("snapshot row of _id %d: not matching, or twice", l.Key.ID)
		}
		seen[l.Key.ID] = true
	}
	if len(seen) != 250 {
		t.Errorf("%d snapshot rows, want the 250 open orders", len(seen))
	}
	// Listed as done after the restart, from the checkpoint.
	run = startRunArgs(t, "stopped", dir, cfg, []string{"--http-addr", "127.0.0.1:0"})
	waitFor(t, time.Minute, "listed", func() bool {
		list := apiSnapshots(t, filepath.Join(dir, "data"))
		return len(list) == 1 && list[0].State == cdc.SnapshotDone && list[0].DoneDocuments == 250
	}, run)
	run.stop()
}

// TestIncrementalSnapshotHTTPAuth: with --http-auth-file, tide snapshot
// needs the credentials (--http-auth-file), and --http-addr names the
// pipeline directly.
func TestIncrementalSnapshotHTTPAuth(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	client := testenv.MongoClient(t, srv.URI())
	if _, err := client.Database("shop").Collection("orders").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte("ops:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: authed
data_dir: %s
source:
  mongo: {uri: %q, database: shop, collection: orders, snapshot: never, max_await: 100ms}
sink:
  file: {path: ./out.jsonl}
`, filepath.Join(dir, "data"), srv.URI()))
	run := startRunArgs(t, "authed", dir, cfg, []string{"--http-addr", "127.0.0.1:0", "--http-auth-file", auth})
	waitFor(t, time.Minute, "the address", func() bool { return readHTTPAddr(filepath.Join(dir, "data")) != "" }, run)
	addr := readHTTPAddr(filepath.Join(dir, "data"))
	o, err := runTide(t, dir, "snapshot", "-f", cfg, "--collection", "shop.orders")
	if err == nil || !strings.Contains(o, "401") {
		t.Fatalf("without credentials: %v\n%s", err, o)
	}
	var out string
	waitFor(t, time.Minute, "accepted", func() bool {
		out, err = runTide(t, dir, "snapshot", "-f", cfg, "--collection", "shop.orders", "--http-addr", addr, "--http-auth-file", auth)
		return err == nil || !strings.Contains(out, "not running")
	}, run)
	if err != nil || !strings.Contains(out, "requested from the running pipeline at "+addr) {
		t.Fatalf("with credentials: %v\n%s", err, out)
	}
	run.stop()
}
