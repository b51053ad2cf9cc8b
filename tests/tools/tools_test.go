// Package tools runs MongoDB's database tools (mongoimport, mongoexport,
// mongodump, mongorestore, mongostat, mongotop) against the embedded
// server and checks that the data round-trips exactly.
//
// The tools are found in TIDE_MONGO_TOOLS (a directory holding the
// binaries) or on PATH; or, with TIDE_MONGO_TOOLS_SRC naming a checkout of
// github.com/mongodb/mongo-tools, built from its vendored sources (about
// a minute and a half on two cores, then cached by the Go build cache).
// Without them the tests skip, unless TIDE_REQUIRE_TOOLS=1 (testenv.Need).
package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

var toolNames = []string{"mongodump", "mongorestore", "mongoimport", "mongoexport", "mongostat", "mongotop"}

var (
	toolsOnce sync.Once
	toolsDir  string
	toolsErr  error
	builtDir  string // removed by TestMain: tools this run built
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// tools returns the directory of the tool binaries, or skips (testenv.Need).
func tools(t *testing.T) string {
	t.Helper()
	toolsOnce.Do(func() { toolsDir, toolsErr = findTools() })
	if toolsErr != nil {
		testenv.Need(t, "tools", fmt.Errorf("MongoDB database tools: %v (set TIDE_MONGO_TOOLS or TIDE_MONGO_TOOLS_SRC)", toolsErr))
	}
	return toolsDir
}

func findTools() (string, error) {
	if dir := os.Getenv("TIDE_MONGO_TOOLS"); dir != "" {
		for _, n := range toolNames {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return "", fmt.Errorf("TIDE_MONGO_TOOLS=%s: %w", dir, err)
			}
		}
		return dir, nil
	}
	if src := os.Getenv("TIDE_MONGO_TOOLS_SRC"); src != "" {
		dir, err := os.MkdirTemp("", "tide-mongo-tools-")
		if err != nil {
			return "", err
		}
		builtDir = dir
		for _, n := range toolNames {
			cmd := exec.Command("go", "build", "-mod=vendor", "-o", filepath.Join(dir, n), "./"+n+"/main")
			cmd.Dir = src
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("build %s in %s: %v\n%s", n, src, err, out)
			}
		}
		return dir, nil
	}
	p, err := exec.LookPath("mongodump")
	if err != nil {
		return "", fmt.Errorf("mongodump is not on PATH")
	}
	dir := filepath.Dir(p)
	for _, n := range toolNames {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return "", fmt.Errorf("%s is not beside %s", n, p)
		}
	}
	return dir, nil
}

// tool runs one tool and returns its combined output, failing the test
// on a non-zero exit.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := toolErr(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func toolErr(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tools(t), name), args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
	return string(out), err
}

const adminPW = "tools-admin-pw"

func authServer(t *testing.T, dataDir string) (*mongowire.Server, string, *mongo.Client) {
	s := testenv.MongoWire(t, func(c *mongowire.Config) {
		c.Auth, c.AdminUser, c.AdminPassword, c.DataDir = true, "admin", adminPW, dataDir
	})
	uri := "mongodb://admin:" + adminPW + "@" + s.Addr() + "/?authSource=admin&directConnection=true"
	return s, uri, testenv.MongoClient(t, uri)
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// docs returns c's documents by _id: the tools decode with several
// workers, so the order they write in (natural order) is not theirs to
// keep, on mongod either, without --maintainInsertionOrder.
func docs(t *testing.T, c *mongo.Collection) []string {
	t.Helper()
	cur, err := c.Find(t.Context(), bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	var raws []bson.Raw
	if err := cur.All(t.Context(), &raws); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(raws))
	for i, r := range raws {
		out[i] = r.String()
	}
	return out
}

// TestImportExport: mongoimport's formats and modes, and mongoexport's,
// against a server with --auth and a data directory.
func TestImportExport(t *testing.T) {
	tools(t)
	_, uri, c := authServer(t, t.TempDir())
	lines := writeFile(t, "l.json", `{"_id":1,"name":"a","n":1.5,"d":{"$date":"2024-01-01T00:00:00Z"}}
{"_id":2,"name":"b","tags":["x","y"]}
{"_id":3,"name":"c","o":{"$oid":"65a000000000000000000001"},"dec":{"$numberDecimal":"1.10"}}
`)
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "lines", "--file", lines)
	arr := writeFile(t, "a.json", `[{"_id":10,"v":1},{"_id":11,"v":2}]`)
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "arr", "--jsonArray", "--file", arr)
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "arr", "--jsonArray", "--drop", "--file", arr)
	csv := writeFile(t, "d.csv", "a,b,c\n1,x,2.5\n2,y,3\n")
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "csv", "--type", "csv", "--headerline", "--file", csv)
	imp := c.Database("imp")
	if got := docs(t, imp.Collection("arr")); len(got) != 2 {
		t.Fatalf("arr after --drop: %v", got)
	}
	if n, _ := imp.Collection("csv").CountDocuments(t.Context(), bson.D{{Key: "a", Value: 2}, {Key: "b", Value: "y"}, {Key: "c", Value: 3}}); n != 1 {
		t.Fatalf("csv: %v", docs(t, imp.Collection("csv")))
	}
	up := writeFile(t, "u.json", "{\"_id\":1,\"name\":\"A\",\"extra\":1}\n{\"_id\":4,\"name\":\"d\"}\n")
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "lines", "--mode", "upsert", "--file", up)
	merge := writeFile(t, "m.json", "{\"_id\":2,\"name\":\"B\",\"new\":true}\n")
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "lines", "--mode", "merge", "--file", merge)
	del := writeFile(t, "x.json", "{\"name\":\"c\"}\n")
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "lines", "--mode", "delete", "--upsertFields", "name", "--file", del)
	want := []string{
		`{"_id": {"$numberInt":"1"},"name": "A","extra": {"$numberInt":"1"}}`,
		`{"_id": {"$numberInt":"2"},"name": "B","tags": ["x","y"],"new": true}`,
		`{"_id": {"$numberInt":"4"},"name": "d"}`,
	}
	if got := docs(t, imp.Collection("lines")); !slices.Equal(got, want) {
		t.Fatalf("lines after upsert, merge and delete:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out := tool(t, "mongoexport", "--uri", uri, "--db", "imp", "--collection", "lines", "--query", `{"_id":{"$gte":2}}`, "--sort", `{"_id":-1}`, "--limit", "1", "--quiet")
	if strings.TrimSpace(out) != `{"_id":4,"name":"d"}` {
		t.Fatalf("mongoexport --query --sort --limit: %q", out)
	}
	out = tool(t, "mongoexport", "--uri", uri, "--db", "imp", "--collection", "lines", "--type", "csv", "--fields", "_id,name", "--quiet")
	if out != "_id,name\n1,A\n2,B\n4,d\n" {
		t.Fatalf("mongoexport csv: %q", out)
	}
	// Exported JSON imports back to the same documents.
	file := filepath.Join(t.TempDir(), "e.json")
	tool(t, "mongoexport", "--uri", uri, "--db", "imp", "--collection", "lines", "--out", file)
	tool(t, "mongoimport", "--uri", uri, "--db", "imp", "--collection", "back", "--file", file)
	if a, b := docs(t, imp.Collection("lines")), docs(t, imp.Collection("back")); !slices.Equal(a, b) {
		t.Fatalf("export/import round trip:\n%v\n%v", a, b)
	}
}

// seed fills app with what a dump has to carry: every BSON type the
// tools write, a validator, indexes with options, a capped collection
// and a view.
func seed(t *testing.T, c *mongo.Client) {
	t.Helper()
	ctx := t.Context()
	db := c.Database("app")
	must := func(cmd bson.D) {
		if err := db.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	must(bson.D{{Key: "create", Value: "orders"}, {Key: "validator", Value: bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "required", Value: bson.A{"qty"}}}}}}, {Key: "validationLevel", Value: "moderate"}})
	dec, _ := bson.ParseDecimal128("1.10")
	var batch []any
	for i := range 200 {
		batch = append(batch, bson.D{{Key: "_id", Value: i}, {Key: "qty", Value: i}, {Key: "sku", Value: fmt.Sprint("s", i%7)},
			{Key: "when", Value: bson.NewDateTimeFromTime(time.UnixMilli(1700000000000 + int64(i)*1000))},
			{Key: "dec", Value: dec}, {Key: "l", Value: int64(i)}, {Key: "f", Value: float64(i) / 3},
			{Key: "bin", Value: bson.Binary{Data: []byte{0, 1, byte(i)}}}, {Key: "ts", Value: bson.Timestamp{T: 1, I: uint32(i)}},
			{Key: "sub", Value: bson.D{{Key: "a", Value: bson.A{1, "x", nil}}}}})
	}
	if _, err := db.Collection("orders").InsertMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, m := range []mongo.IndexModel{
		{Keys: bson.D{{Key: "sku", Value: 1}, {Key: "qty", Value: -1}}, Options: options.Index().SetName("sku_qty").SetPartialFilterExpression(bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 5}}}})},
		{Keys: bson.D{{Key: "when", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(999999999)},
		{Keys: bson.D{{Key: "qty", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true).SetName("u_qty")},
	} {
		if _, err := db.Collection("orders").Indexes().CreateOne(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	must(bson.D{{Key: "create", Value: "log"}, {Key: "capped", Value: true}, {Key: "size", Value: 4096}, {Key: "max", Value: 10}})
	for i := range 20 {
		if _, err := db.Collection("log").InsertOne(ctx, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	must(bson.D{{Key: "create", Value: "big"}, {Key: "viewOn", Value: "orders"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "qty", Value: bson.D{{Key: "$gt", Value: 190}}}}}}}}})
	if _, err := c.Database("other").Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
}

// same fails unless db has the same collections (listing, options,
// UUIDs when uuids), indexes and documents on a and b.
func same(t *testing.T, a, b *mongo.Client, db string, uuids bool) {
	t.Helper()
	list := func(c *mongo.Client) []bson.Raw {
		cur, err := c.Database(db).ListCollections(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var out []bson.Raw
		if err := cur.All(t.Context(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	strip := func(r bson.Raw) string {
		var d bson.D
		if err := bson.Unmarshal(r, &d); err != nil {
			t.Fatal(err)
		}
		for i, e := range d {
			if e.Key == "info" && !uuids {
				d[i].Value = nil
			}
		}
		b, _ := bson.MarshalExtJSON(d, true, false)
		return string(b)
	}
	la, lb := list(a), list(b)
	if len(la) != len(lb) {
		t.Fatalf("%s: %d collections vs %d:\n%v\n%v", db, len(la), len(lb), la, lb)
	}
	for i := range la {
		if strip(la[i]) != strip(lb[i]) {
			t.Fatalf("%s listing:\n%s\n%s", db, strip(la[i]), strip(lb[i]))
		}
		name := la[i].Lookup("name").StringValue()
		if la[i].Lookup("type").StringValue() == "view" {
			continue
		}
		ca, cb := a.Database(db).Collection(name), b.Database(db).Collection(name)
		if da, dbb := docs(t, ca), docs(t, cb); !slices.Equal(da, dbb) {
			t.Fatalf("%s.%s: %d documents vs %d\n%v\n%v", db, name, len(da), len(dbb), da, dbb)
		}
		ia, ib := indexes(t, ca), indexes(t, cb)
		if !slices.Equal(ia, ib) {
			t.Fatalf("%s.%s indexes:\n%v\n%v", db, name, ia, ib)
		}
	}
}

func indexes(t *testing.T, c *mongo.Collection) []string {
	cur, err := c.Indexes().List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var raws []bson.Raw
	if err := cur.All(t.Context(), &raws); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(raws))
	for i, r := range raws {
		out[i] = r.String()
	}
	slices.Sort(out)
	return out
}

// TestDumpRestore: mongodump in its forms (whole server, one database,
// one collection with --query, --gzip, --archive), restored by
// mongorestore (--drop, --nsInclude, users), round-trips exactly between
// two servers with --auth and data directories.
func TestDumpRestore(t *testing.T) {
	tools(t)
	_, uriA, a := authServer(t, t.TempDir())
	sb, uriB, b := authServer(t, t.TempDir())
	seed(t, a)
	if err := a.Database("app").RunCommand(t.Context(), bson.D{{Key: "createUser", Value: "clerk"}, {Key: "pwd", Value: "clerk-pw"}, {Key: "roles", Value: bson.A{"readWrite"}}}).Err(); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "dump")
	tool(t, "mongodump", "--uri", uriA, "--out", out)
	for _, f := range []string{"app/orders.bson", "app/orders.metadata.json", "app/big.metadata.json", "app/log.bson", "admin/system.users.bson", "admin/system.version.bson"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("dump lacks %s: %v", f, err)
		}
	}
	tool(t, "mongorestore", "--uri", uriB, out)
	same(t, a, b, "app", false)
	same(t, a, b, "other", false)
	// The users came along: clerk logs in on b with a's password.
	clerkURI := "mongodb://clerk:clerk-pw@" + sb.Addr() + "/app?directConnection=true"
	cc := testenv.MongoClient(t, clerkURI)
	if n, err := cc.Database("app").Collection("orders").CountDocuments(t.Context(), bson.D{}); err != nil || n != 200 {
		t.Fatalf("clerk on the restored server: %d, %v", n, err)
	}

	// --drop replaces what is there; --nsInclude restores one namespace.
	if _, err := b.Database("app").Collection("orders").DeleteMany(t.Context(), bson.D{{Key: "qty", Value: bson.D{{Key: "$lt", Value: 100}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Database("other").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: "extra"}}); err != nil {
		t.Fatal(err)
	}
	tool(t, "mongorestore", "--uri", uriB, "--drop", "--nsInclude", "app.orders", out)
	same(t, a, b, "app", false)
	if n, _ := b.Database("other").Collection("c").CountDocuments(t.Context(), bson.D{}); n != 2 {
		t.Fatalf("--nsInclude app.orders touched other.c: %d documents", n)
	}

	for name, args := range map[string][]string{
		"gzip dir":        {"--gzip", "--out", filepath.Join(t.TempDir(), "gz")},
		"archive":         {"--archive=" + filepath.Join(t.TempDir(), "a.archive")},
		"gzip archive db": {"--gzip", "--archive=" + filepath.Join(t.TempDir(), "g.archive"), "--db", "app"},
	} {
		t.Run(name, func(t *testing.T) {
			tool(t, "mongodump", append([]string{"--uri", uriA}, args...)...)
			if err := b.Database("app").Drop(t.Context()); err != nil {
				t.Fatal(err)
			}
			rargs := []string{"--uri", uriB, "--drop"}
			for _, a := range args {
				switch {
				case a == "--out", a == "--db", a == "app":
				case strings.HasPrefix(a, "--archive"), a == "--gzip":
					rargs = append(rargs, a)
				default:
					rargs = append(rargs, a) // the --out directory
				}
			}
			tool(t, "mongorestore", rargs...)
			same(t, a, b, "app", false)
		})
	}

	// One collection, with --query.
	q := filepath.Join(t.TempDir(), "q")
	tool(t, "mongodump", "--uri", uriA, "--db", "app", "--collection", "orders", "--query", `{"qty":{"$lt":10}}`, "--out", q)
	tool(t, "mongorestore", "--uri", uriB, "--drop", "--nsFrom", "app.orders", "--nsTo", "app.few", q)
	if n, _ := b.Database("app").Collection("few").CountDocuments(t.Context(), bson.D{}); n != 10 {
		t.Fatalf("--query dump restored %d documents, want 10", n)
	}
}

// TestDumpOplogReplay: mongodump --oplog while writes go on, then
// mongorestore --oplogReplay --preserveUUID: the restored server has the
// collections under their UUIDs and every write the oplog captured.
func TestDumpOplogReplay(t *testing.T) {
	tools(t)
	sa := testenv.MongoWire(t)
	sb := testenv.MongoWire(t)
	a, b := testenv.MongoClient(t, sa.URI()), testenv.MongoClient(t, sb.URI())
	seed(t, a)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int)
	go func() { // the writer: its inserts overlap the dump
		n := 0
		defer func() { done <- n }()
		for ctx.Err() == nil {
			if _, err := a.Database("live").Collection("w").InsertOne(ctx, bson.D{{Key: "_id", Value: n}, {Key: "pad", Value: strings.Repeat("x", 100)}}); err != nil {
				return
			}
			if n > 0 {
				if _, err := a.Database("live").Collection("w").UpdateOne(ctx, bson.D{{Key: "_id", Value: n - 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "next", Value: n}}}}); err != nil {
					return
				}
			}
			if n%50 == 0 { // a transaction: one applyOps entry in the oplog
				sess, err := a.StartSession()
				if err != nil {
					return
				}
				_, err = sess.WithTransaction(ctx, func(sc context.Context) (any, error) {
					return a.Database("live").Collection("txn").InsertMany(sc, []any{bson.D{{Key: "_id", Value: 2 * n}}, bson.D{{Key: "_id", Value: 2*n + 1}}})
				})
				sess.EndSession(context.Background())
				if err != nil {
					return
				}
			}
			n++
		}
	}()
	for {
		if n, _ := a.Database("live").Collection("w").EstimatedDocumentCount(t.Context()); n > 200 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := filepath.Join(t.TempDir(), "dump")
	dumpOut := tool(t, "mongodump", "--uri", sa.URI(), "--oplog", "--out", out)
	cancel()
	<-done
	if !strings.Contains(dumpOut, "oplog entr") {
		t.Fatalf("mongodump --oplog wrote no oplog:\n%s", dumpOut)
	}
	restoreOut := tool(t, "mongorestore", "--uri", sb.URI(), "--oplogReplay", "--preserveUUID", "--drop", out)
	if !strings.Contains(restoreOut, "replaying oplog") {
		t.Fatalf("mongorestore did not replay the oplog:\n%s", restoreOut)
	}
	same(t, a, b, "app", true)
	// Every document on b is a's as of some moment: its writes are a
	// prefix of the writer's, each update applied.
	w := docs(t, b.Database("live").Collection("w"))
	if len(w) < 200 {
		t.Fatalf("restored %d writer documents, want at least 200", len(w))
	}
	var last bson.Raw
	if err := b.Database("live").Collection("w").FindOne(t.Context(), bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&last); err != nil {
		t.Fatal(err)
	}
	top := last.Lookup("_id").Int32()
	if int(top)+1 != len(w) {
		t.Fatalf("restored writer documents have gaps: %d documents, last _id %d", len(w), top)
	}
	// Each insert of n is followed by the update of n-1: all but the last
	// one or two documents carry their update.
	missing, err := b.Database("live").Collection("w").CountDocuments(t.Context(), bson.D{{Key: "next", Value: bson.D{{Key: "$exists", Value: false}}}})
	if err != nil || missing > 2 {
		t.Fatalf("%d restored writer documents lack their update (want at most 2), %v", missing, err)
	}
	// Transactions replay whole: both documents of each, or neither.
	if n, err := b.Database("live").Collection("txn").CountDocuments(t.Context(), bson.D{}); err != nil || n == 0 || n%2 != 0 {
		t.Fatalf("restored %d transaction documents, %v", n, err)
	}
	if !bytes.Equal(firstBatch(t, a, "app"), firstBatch(t, b, "app")) {
		t.Fatal("--preserveUUID: listings differ")
	}
}

func firstBatch(t *testing.T, c *mongo.Client, db string) []byte {
	r, err := c.Database(db).RunCommand(t.Context(), bson.D{{Key: "listCollections", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	return r.Lookup("cursor", "firstBatch").Value
}

// TestStatAndTop: mongostat reads serverStatus, mongotop top.
func TestStatAndTop(t *testing.T) {
	tools(t)
	s := testenv.MongoWire(t)
	c := testenv.MongoClient(t, s.URI())
	if _, err := c.Database("app").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	out := tool(t, "mongostat", "--uri", s.URI(), "-n", "2", "--noheaders")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 || !strings.Contains(rows[0], "rs0") || !strings.Contains(rows[0], "PRI") {
		t.Fatalf("mongostat:\n%s", out)
	}
	out = tool(t, "mongotop", "--uri", s.URI(), "-n", "1", "1")
	if !strings.Contains(out, "app.c") || !strings.Contains(out, "total") {
		t.Fatalf("mongotop:\n%s", out)
	}
}

// BenchmarkDumpRestore: mongodump --archive and mongorestore of
// TIDE_BENCH_DOCS (default 100000) 200-byte documents, in documents per
// second through the real tools.
func BenchmarkDumpRestore(b *testing.B) {
	dir, err := findTools()
	if err != nil {
		testenv.Need(b, "tools", fmt.Errorf("MongoDB database tools: %v (set TIDE_MONGO_TOOLS or TIDE_MONGO_TOOLS_SRC)", err))
	}
	n := 100000
	if v := os.Getenv("TIDE_BENCH_DOCS"); v != "" {
		fmt.Sscan(v, &n)
	}
	src, dst := testenv.MongoWire(b), testenv.MongoWire(b)
	c := testenv.MongoClient(b, src.URI())
	for i := 0; i < n; i += 1000 {
		batch := make([]any, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			batch = append(batch, bson.D{{Key: "_id", Value: j}, {Key: "pad", Value: strings.Repeat("x", 170)}})
		}
		if _, err := c.Database("bench").Collection("c").InsertMany(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	archive := filepath.Join(b.TempDir(), "a.archive")
	var dump, restore time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command(filepath.Join(dir, "mongodump"), "--uri", src.URI(), "--archive="+archive, "--db", "bench").CombinedOutput(); err != nil {
			b.Fatalf("mongodump: %v\n%s", err, out)
		}
		dump += time.Since(start)
		start = time.Now()
		if out, err := exec.Command(filepath.Join(dir, "mongorestore"), "--uri", dst.URI(), "--archive="+archive, "--drop").CombinedOutput(); err != nil {
			b.Fatalf("mongorestore: %v\n%s", err, out)
		}
		restore += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/dump.Seconds(), "dump-docs/s")
	b.ReportMetric(float64(n*b.N)/restore.Seconds(), "restore-docs/s")
}

// TestBackupRestoreRoles: mongodump --oplog as a backup user, then
// mongorestore --oplogReplay --drop (users included) as a restore user.
func TestBackupRestoreRoles(t *testing.T) {
	tools(t)
	sa, _, a := authServer(t, "")
	sb, _, b := authServer(t, "")
	seed(t, a)
	for _, c := range []*mongo.Client{a, b} {
		for _, u := range [][2]string{{"bk", "backup"}, {"rs", "restore"}} {
			if err := c.Database("admin").RunCommand(t.Context(), bson.D{{Key: "createUser", Value: u[0]}, {Key: "pwd", Value: u[0] + "-pw"}, {Key: "roles", Value: bson.A{u[1]}}}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	as := func(s *mongowire.Server, user string) string {
		return "mongodb://" + user + ":" + user + "-pw@" + s.Addr() + "/?authSource=admin&directConnection=true"
	}
	out := filepath.Join(t.TempDir(), "dump")
	tool(t, "mongodump", "--uri", as(sa, "bk"), "--oplog", "--out", out)
	tool(t, "mongorestore", "--uri", as(sb, "rs"), "--oplogReplay", "--drop", out)
	same(t, a, b, "app", false)
}
