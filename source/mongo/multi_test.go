package mongo

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// multiEnv is an embedded server with a client, for sources of many
// collections.
type multiEnv struct {
	uri    string
	client *mongo.Client
}

func newMultiEnv(t testing.TB, colls ...string) *multiEnv {
	t.Helper()
	return newMultiEnvWith(t, nil, colls...)
}

func newMultiEnvWith(t testing.TB, opt func(*mongowire.Config), colls ...string) *multiEnv {
	t.Helper()
	var opts []func(*mongowire.Config)
	if opt != nil {
		opts = append(opts, opt)
	}
	srv := testenv.MongoWire(t, opts...)
	e := &multiEnv{uri: srv.URI(), client: testenv.MongoClient(t, srv.URI())}
	for _, ns := range colls {
		e.create(t, ns)
	}
	return e
}

func (e *multiEnv) coll(ns string) *mongo.Collection {
	db, c, _ := strings.Cut(ns, ".")
	return e.client.Database(db).Collection(c)
}

func (e *multiEnv) create(t testing.TB, ns string) {
	t.Helper()
	db, c, _ := strings.Cut(ns, ".")
	if err := e.client.Database(db).CreateCollection(context.Background(), c); err != nil {
		t.Fatalf("create %s: %v", ns, err)
	}
}

func (e *multiEnv) config(t testing.TB, db string, colls ...string) Config {
	return Config{
		URI: e.uri, Database: db, Collections: colls,
		Snapshot: "never", MaxAwait: 100 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		ConnectTimeout: 3 * time.Second, Logger: testLogger(t),
	}
}

func (e *multiEnv) adminCommand(t testing.TB, cmd bson.D) {
	t.Helper()
	if err := e.client.Database("admin").RunCommand(context.Background(), cmd).Err(); err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
}

// mchange is an event reduced to what the tests compare.
type mchange struct {
	op cdc.Op
	ns string
	id int // document _id, -1 for DDL
}

func (c mchange) String() string { return fmt.Sprintf("%s %s %d", c.op, c.ns, c.id) }

func changes(t testing.TB, evs []cdc.Event) []mchange {
	t.Helper()
	var out []mchange
	for _, ev := range nonMarkers(evs) {
		c := mchange{op: ev.Op, ns: ev.Namespace, id: -1}
		if ev.DocumentKey != nil {
			c.id = docID(t, ev)
		}
		out = append(out, c)
	}
	return out
}

func wantChanges(t testing.TB, got []mchange, want ...mchange) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
}

func ins(ns string, id int) mchange { return mchange{cdc.OpInsert, ns, id} }

func TestMultiConfigRefused(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		words []string
	}{
		{"collection and collections", Config{Database: "shop", Collection: "orders", Collections: []string{"orders"}}, []string{"collection and collections"}},
		{"bad glob", Config{Database: "shop", Collections: []string{"orders", "cust_[a"}}, []string{`collections[1]: "cust_[a"`, "not a valid glob"}},
		{"bad exclude", Config{Database: "shop", Collections: []string{"*"}, Exclude: []string{"[x"}}, []string{`exclude[0]: "[x"`}},
		{"cluster entry without db", Config{Collections: []string{"orders"}}, []string{`collections[0]: "orders"`, `"db.coll"`}},
		{"exclude alone", Config{Database: "shop", Collection: "orders", Exclude: []string{"x"}}, []string{"exclude: needs collections"}},
		{"empty entry", Config{Database: "shop", Collections: []string{""}}, []string{"collections[0]", "empty"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.URI = "mongodb://127.0.0.1:1"
			src := New(c.cfg)
			defer src.Close()
			wantErr(t, src.Open(t.Context(), nil), nil, c.words...)
		})
	}
}

func TestGlobRegexp(t *testing.T) {
	globs := []string{"*", "cust_*", "a?c", "[a-c]x", "[^ab]*", `a\*b`, "o.rders", "x+y(z)", `[\]a]`, "é*", `[a\-]`}
	names := []string{"", "cust_", "cust_1", "abc", "a/c", "bx", "dx", "cx", "a*b", "axb", "o.rders", "oxrders", "x+y(z)", "]", "a", "éa", "ab/c"}
	for _, g := range globs {
		re, err := regexp.Compile(globRegexp(g))
		if err != nil {
			t.Fatalf("glob %q: regexp %q: %v", g, globRegexp(g), err)
		}
		for _, n := range names {
			want, err := path.Match(g, n)
			if err != nil {
				t.Fatalf("glob %q: %v", g, err)
			}
			if got := re.MatchString(n); got != want {
				t.Errorf("glob %q (regexp %q) on %q: %v, path.Match says %v", g, globRegexp(g), n, got, want)
			}
		}
	}
}

func TestMultiDatabaseLevel(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust_a", "shop.cust_b", "shop.tmp", "other.orders")
	cfg := e.config(t, "shop", "orders", "cust_*")
	cfg.Exclude = []string{"cust_b"}
	src := openSource(t, cfg, nil)
	insert(t, e.coll("shop.tmp"), 1)
	insert(t, e.coll("shop.orders"), 1)
	insert(t, e.coll("shop.cust_b"), 1)
	insert(t, e.coll("other.orders"), 1)
	insert(t, e.coll("shop.cust_a"), 2)
	insert(t, e.coll("shop.orders"), 3)
	evs, err := pollUntil(t, src, countOps(3))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, evs), ins("shop.orders", 1), ins("shop.cust_a", 2), ins("shop.orders", 3))
	id := src.Identity()
	if id["collections"] != `["orders","cust_*"]` || id["exclude"] != `["cust_b"]` {
		t.Errorf("identity collections %q exclude %q", id["collections"], id["exclude"])
	}
	cat := catalogAt(t, id, evs[len(evs)-1].Pos)
	if len(cat) != 2 || cat["shop.orders"] == "" || cat["shop.cust_a"] == "" {
		t.Errorf("catalog %v, want shop.orders and shop.cust_a with UUIDs", cat)
	}
}

// catalogAt returns the catalog a checkpoint at pos would record.
func catalogAt(t testing.TB, meta map[string]string, pos cdc.Position) catalog {
	t.Helper()
	e, ok := positionEpoch(pos)
	if !ok {
		t.Fatalf("position %s names no catalog", pos)
	}
	j, ok := meta[catalogKey(e)]
	if !ok {
		t.Fatalf("identity has no %s: %v", catalogKey(e), meta)
	}
	c, err := parseCatalog(j)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMultiClusterLevel(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.b", "crm.customers", "crm.leads", "admin.things", "config.things", "local.things")
	src := openSource(t, e.config(t, "", "shop.*", "crm.customers", "*.things"), nil)
	for _, ns := range []string{"admin.things", "shop.a", "crm.leads", "config.things", "crm.customers", "local.things", "shop.b"} {
		insert(t, e.coll(ns), len(ns))
	}
	evs, err := pollUntil(t, src, countOps(3))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, evs), ins("shop.a", 6), ins("crm.customers", 13), ins("shop.b", 6))
	cat := catalogAt(t, src.Identity(), evs[len(evs)-1].Pos)
	if got := slices.Sorted(mapsKeys(cat)); !slices.Equal(got, []string{"crm.customers", "shop.a", "shop.b"}) {
		t.Errorf("catalog %v", got)
	}
}

func mapsKeys(c catalog) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range c {
			if !yield(k) {
				return
			}
		}
	}
}

func TestMultiNeverCapturesSystem(t *testing.T) {
	f, err := newFilter("", []string{"*.*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"admin.x", "local.oplog.rs", "config.system.sessions", "shop.system.views", "shop.system.js"} {
		if f.matchNS(ns) {
			t.Errorf("%s is captured", ns)
		}
	}
	if !f.matchNS("shop.orders") {
		t.Error("shop.orders is not captured by *.*")
	}
}

func TestMultiDDLFollowsCapture(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust", "shop.tmp_q")
	cfg := e.config(t, "shop", "*")
	cfg.Exclude = []string{"tmp_*"}
	src := openSource(t, cfg, nil)
	ctx := context.Background()
	e.create(t, "shop.late")
	insert(t, e.coll("shop.late"), 1)
	if err := e.coll("shop.orders").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, e.coll("shop.orders"), 2) // re-created implicitly: captured again
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.cust"}, {Key: "to", Value: "shop.tmp_cust"}})
	insert(t, e.coll("shop.tmp_cust"), 3) // no longer captured
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.tmp_q"}, {Key: "to", Value: "shop.q"}})
	insert(t, e.coll("shop.q"), 4) // captured from the rename on
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		cs := changes(t, evs)
		return len(cs) > 0 && cs[len(cs)-1] == ins("shop.q", 4)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, evs),
		mchange{cdc.OpCreate, "shop.late", -1}, ins("shop.late", 1),
		mchange{cdc.OpDrop, "shop.orders", -1},
		mchange{cdc.OpCreate, "shop.orders", -1}, ins("shop.orders", 2),
		mchange{cdc.OpRename, "shop.cust", -1},
		mchange{cdc.OpRename, "shop.tmp_q", -1}, ins("shop.q", 4))
	for _, ev := range evs {
		if ev.Op == cdc.OpRename {
			to := renameTarget(ev)
			if want := map[string]string{"shop.cust": "shop.tmp_cust", "shop.tmp_q": "shop.q"}[ev.Namespace]; to != want {
				t.Errorf("rename of %s: Extra.to is %q, want %q", ev.Namespace, to, want)
			}
		}
	}
	cat := catalogAt(t, src.Identity(), evs[len(evs)-1].Pos)
	if got := slices.Sorted(mapsKeys(cat)); !slices.Equal(got, []string{"shop.late", "shop.orders", "shop.q"}) {
		t.Errorf("catalog %v, want late, orders, q", got)
	}
	// The catalog at the first event (before the DDL) is still the one
	// a checkpoint there records.
	if err := src.Ack(ctx, evs[0].Pos); err != nil {
		t.Fatal(err)
	}
	if cat := catalogAt(t, src.Identity(), evs[0].Pos); len(cat) != 2 {
		t.Errorf("catalog at the start %v, want orders and cust (tmp_q is excluded)", cat)
	}
	first := catalogAt(t, src.Identity(), nonMarkers(evs)[0].Pos)
	if got := slices.Sorted(mapsKeys(first)); !slices.Equal(got, []string{"shop.cust", "shop.late", "shop.orders"}) {
		t.Errorf("catalog at the create of shop.late %v", got)
	}
}

// TestMultiRestartMidStream checkpoints at every event of a run with DDL
// in it and restarts from a few: the events after the checkpoint come
// again, exactly, and the catalog is the one of the checkpoint.
func TestMultiRestartMidStream(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.b")
	cfg := e.config(t, "shop", "*")
	src := openSource(t, cfg, nil)
	insert(t, e.coll("shop.a"), 1, 2)
	e.create(t, "shop.c")
	insert(t, e.coll("shop.c"), 3)
	insert(t, e.coll("shop.b"), 4)
	if err := e.coll("shop.a").Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	insert(t, e.coll("shop.b"), 5)
	all, err := pollUntil(t, src, countOps(7))
	if err != nil {
		t.Fatal(err)
	}
	meta := src.Identity() // nothing acknowledged: every epoch is there
	src.Close()
	whole := changes(t, all)
	for _, k := range []int{0, 2, 3, 5} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			evs := nonMarkers(all)
			cp := checkpointOf(evs[k].Pos, meta)
			again := openSource(t, cfg, &cp)
			got, err := pollUntil(t, again, countOps(len(evs)-k-1))
			if err != nil {
				t.Fatal(err)
			}
			wantChanges(t, changes(t, got), whole[k+1:]...)
		})
	}
}

// A collection dropped while stopped is fine: the stream shows the drop.
// (Dropped and re-created: recreate_test.go.)
func TestMultiDroppedWhileStopped(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "*")
	src := openSource(t, cfg, nil)
	insert(t, e.coll("shop.orders"), 1)
	evs, err := pollUntil(t, src, countOps(1))
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()

	if err := e.coll("shop.orders").Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := openSource(t, cfg, &cp)
	got, err := pollUntil(t, again, countOps(1))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, got), mchange{cdc.OpDrop, "shop.orders", -1})
}

func TestMultiDropDatabaseEnds(t *testing.T) {
	e := newMultiEnv(t, "shop.a", "shop.b")
	src := openSource(t, e.config(t, "shop", "*"), nil)
	insert(t, e.coll("shop.a"), 1)
	if err := e.client.Database("shop").Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, ErrInvalidated, "database shop", "dropDatabase")
	got := changes(t, evs)
	if len(got) < 4 || got[0] != ins("shop.a", 1) || got[len(got)-2].op != cdc.OpDropDatabase || got[len(got)-1].op != cdc.OpInvalidate {
		t.Fatalf("changes %v: want the insert, the drops, dropDatabase, invalidate", got)
	}
}

// TestMultiSnapshotResume copies three collections two at a time, stops
// mid-snapshot at several points and resumes: every document once, in
// _id order per collection, then the stream's changes.
func TestMultiSnapshotResume(t *testing.T) {
	const n = 40
	e := newMultiEnv(t)
	names := []string{"shop.a", "shop.b", "shop.c"}
	for _, ns := range names {
		docs := make([]any, n)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: i}}
		}
		if _, err := e.coll(ns).InsertMany(context.Background(), docs); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config(t, "shop", "*")
	cfg.Snapshot, cfg.SnapshotBatch, cfg.SnapshotParallelism = "initial", 7, 2
	for _, stopAt := range []int{1, 30, 75, 119} {
		t.Run(fmt.Sprint(stopAt), func(t *testing.T) {
			snapshotDone := func(evs []cdc.Event) bool {
				return len(evs) > 0 && bytesHasPrefix(evs[len(evs)-1].Pos, `{"resume_token"`)
			}
			src := openSource(t, cfg, nil)
			full, err := pollUntil(t, src, snapshotDone)
			if err != nil {
				t.Fatal(err)
			}
			full = nonMarkers(full)
			first := full[:stopAt]
			cp := checkpointOf(first[len(first)-1].Pos, src.Identity())
			src.Close()
			again := openSource(t, cfg, &cp)
			rest, err := pollUntil(t, again, snapshotDone)
			if err != nil {
				t.Fatal(err)
			}
			// The restart hands out what the first run handed out after
			// the checkpoint, positions included.
			rest = nonMarkers(rest)
			if len(rest) != len(full)-stopAt {
				t.Fatalf("after the restart %d documents, want %d", len(rest), len(full)-stopAt)
			}
			for i, ev := range rest {
				if want := full[stopAt+i]; ev.Namespace != want.Namespace || docID(t, ev) != docID(t, want) || string(ev.Pos) != string(want.Pos) {
					t.Fatalf("event %d after the restart: %s %d at %s, the first run had %s %d at %s",
						i, ev.Namespace, docID(t, ev), ev.Pos, want.Namespace, docID(t, want), want.Pos)
				}
			}
			seen := map[mchange]int{}
			last := map[string]int{}
			for _, c := range append(changes(t, first), changes(t, rest)...) {
				if c.op != cdc.OpSnapshot {
					t.Fatalf("unexpected %v", c)
				}
				seen[c]++
				if l, ok := last[c.ns]; ok && c.id <= l && seen[c] == 1 {
					t.Errorf("%v after _id %d", c, l)
				}
				last[c.ns] = c.id
			}
			for _, ns := range names {
				for i := range n {
					if k := seen[mchange{cdc.OpSnapshot, ns, i}]; k != 1 {
						t.Errorf("%s _id %d copied %d times", ns, i, k)
					}
				}
			}
			// Progress is of the collections this run copied.
			st := again.Stats()
			if len(st.SnapshotByNamespace) == 0 {
				t.Error("no snapshot progress by namespace")
			}
			for ns, p := range st.SnapshotByNamespace {
				if p.Total < n || p.Done > p.Total {
					t.Errorf("progress of %s: %+v, want total >= %d", ns, p, n)
				}
			}
			insert(t, e.coll("shop.b"), 1000+stopAt)
			more, err := pollUntil(t, again, countOps(1))
			if err != nil {
				t.Fatal(err)
			}
			wantChanges(t, changes(t, more), ins("shop.b", 1000+stopAt))
		})
	}
}

func bytesHasPrefix(b []byte, p string) bool { return strings.HasPrefix(string(b), p) }

// TestMultiSnapshotPosition checks the position format of a snapshot of
// many collections.
func TestMultiSnapshotPosition(t *testing.T) {
	ms := newMultiSnapshot(bson.Raw(bsonDoc(t, bson.D{{Key: "_data", Value: "82AB"}})), catalog{"s.b": "1", "s.a": "2"}, 1,
		map[string]json.RawMessage{"s.a": json.RawMessage(`{"$numberInt":"3"}`)}, "s.a")
	r := &reader{s: &Source{multi: newMulti(&filter{})}, epoch: 4}
	got := string(ms.pos(r))
	want := `{"snapshot":{"start_token":{"_data":"82AB"},"next":1,"active":{"s.a":{"$numberInt":"3"}},"turn":"s.a"},"catalog":4}`
	if got != want {
		t.Fatalf("position\n got %s\nwant %s", got, want)
	}
	p, err := parsePosition(cdc.Position(got))
	if err != nil || *p.Catalog != 4 || *p.Snapshot.Next != 1 {
		t.Fatalf("parse: %+v, %v", p, err)
	}
}

func bsonDoc(t testing.TB, d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMultiServerSideMatch runs the filter's $match on a raw database
// stream: the server itself sends only the captured namespaces' events,
// a rename into a captured name, and dropDatabase.
func TestMultiServerSideMatch(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust_a", "shop.cust_b", "shop.tmp", "shop.x.y")
	f, err := newFilter("shop", []string{"orders", "cust_*", "x.*"}, []string{"cust_b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cs, err := e.client.Database("shop").Watch(ctx, bson.A{f.stage()})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	for _, ns := range []string{"shop.tmp", "shop.orders", "shop.cust_b", "shop.cust_a", "shop.x.y"} {
		insert(t, e.coll(ns), len(ns))
	}
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.tmp"}, {Key: "to", Value: "shop.cust_t"}})
	if err := e.client.Database("shop").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var got, drops []string
	for len(got) < 6 && cs.Next(ctx) {
		var ev struct {
			Op string `bson:"operationType"`
			NS struct {
				DB   string `bson:"db"`
				Coll string `bson:"coll"`
			} `bson:"ns"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Op == "drop" { // one per collection, in an order of the server's
			drops = append(drops, ev.NS.Coll)
			continue
		}
		got = append(got, ev.Op+" "+ev.NS.DB+"."+ev.NS.Coll)
	}
	want := []string{"insert shop.orders", "insert shop.cust_a", "insert shop.x.y", "rename shop.tmp", "dropDatabase shop.", "invalidate ."}
	if !slices.Equal(got, want) {
		t.Fatalf("server sent\n %v\nwant\n %v", got, want)
	}
	if slices.Sort(drops); !slices.Equal(drops, []string{"cust_a", "cust_t", "orders", "x.y"}) {
		t.Errorf("drops %v, want those of cust_a, cust_t, orders, x.y", drops)
	}
}

// TestMultiSnapshotProgressBars draws one bar per collection.
func TestMultiSnapshotProgressBars(t *testing.T) {
	e := newMultiEnv(t)
	for _, ns := range []string{"shop.a", "shop.b", "shop.c"} {
		insert(t, e.coll(ns), 1, 2, 3)
	}
	var out strings.Builder
	cfg := e.config(t, "shop", "*")
	cfg.Snapshot, cfg.Progress = "initial", &out
	src := New(cfg)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pollUntil(t, src, countOps(9)); err != nil {
		t.Fatal(err)
	}
	src.Close() // the reader has stopped writing
	text := out.String()
	for _, ns := range []string{"shop.a", "shop.b", "shop.c"} {
		if !strings.Contains(text, "snapshot "+ns+" [##############################] 3/3 docs 100%\n") {
			t.Errorf("no full bar for %s in %q", ns, text)
		}
	}
	if !regexp.MustCompile(`\x1b\[[1-3]A\r`).MatchString(text) {
		t.Errorf("the block of bars is not redrawn in place: %q", text)
	}
}

// A database-level stream cut mid-way resumes from the last position:
// across three collections and a create, nothing lost, nothing twice.
func TestMultiReconnectWithoutLoss(t *testing.T) {
	e := newMultiEnvWith(t, testCommands, "shop.a", "shop.b", "shop.c")
	src := openSource(t, e.config(t, "shop", "*"), nil)
	names := []string{"shop.a", "shop.b", "shop.c", "shop.d"}
	var want []mchange
	var got []cdc.Event
	next := 0
	for round := range 4 {
		if round == 2 {
			e.create(t, "shop.d")
			want = append(want, mchange{cdc.OpCreate, "shop.d", -1})
		}
		for range 20 {
			ns := names[next%(3+min(round/2, 1))]
			insert(t, e.coll(ns), next)
			want = append(want, ins(ns, next))
			next++
		}
		if round < 3 {
			err := e.client.Database("admin").RunCommand(context.Background(), bson.D{
				{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 3}}},
				{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"getMore", "aggregate"}}, {Key: "closeConnection", Value: true}}},
			}).Err()
			if err != nil {
				t.Fatal(err)
			}
		}
		before := len(nonMarkers(got))
		evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return before+len(nonMarkers(evs)) >= len(want) })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs...)
	}
	wantChanges(t, changes(t, got), want...)
	if st := src.Stats(); st.Reconnects == 0 {
		t.Error("stats show no reconnect")
	}
}

// Lost history is reported as for one collection.
func TestMultiHistoryLost(t *testing.T) {
	e := newMultiEnvWith(t, func(c *mongowire.Config) { c.OplogBytes = 16 << 10 }, "shop.a", "shop.b")
	cfg := e.config(t, "shop", "*")
	src := openSource(t, cfg, nil)
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()
	for i := range 300 {
		if _, err := e.coll("shop.b").InsertOne(context.Background(), bson.D{{Key: "_id", Value: i}, {Key: "pad", Value: strings.Repeat("y", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	again := New(cfg)
	err = again.Open(t.Context(), &cp)
	if err == nil {
		_, err = pollUntil(t, again, func([]cdc.Event) bool { return false })
	}
	again.Close()
	wantErr(t, err, ErrHistoryLost, "database shop", "re-snapshot", "tide checkpoint reset", "tide snapshot -f FILE", "tide checkpoint set -f FILE --cluster-time T")
}

// A collection renamed to another captured name in the middle of its
// copy stops the snapshot: documents may have been missed.
func TestMultiSnapshotRenamedMidCopyRefused(t *testing.T) {
	e := newMultiEnv(t)
	docs := make([]any, 100)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := e.coll("shop.a").InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t, "shop", "*")
	cfg.Snapshot, cfg.SnapshotBatch, cfg.MaxBufferedBytes = "initial", 10, 16<<10 // the reader waits on a full queue
	src := openSource(t, cfg, nil)
	first, err := pollUntil(t, src, countOps(1))
	if err != nil {
		t.Fatal(err)
	}
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.a"}, {Key: "to", Value: "shop.b"}})
	if len(nonMarkers(first)) >= 100 {
		t.Fatal("the copy finished before the rename")
	}
	_, err = pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, ErrIdentity, "shop.a was renamed to shop.b during the initial snapshot", "tide checkpoint reset")
}

// A checkpoint of a narrower filter, or of one collection, is refused
// with the key that differs. (A narrower filter than the checkpoint's is
// accepted: recreate_test.go.)
func TestMultiIdentityMismatchRefused(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.cust")
	cfg := e.config(t, "shop", "orders", "c*")
	cfg.Exclude = []string{"cust"}
	src := openSource(t, cfg, nil)
	evs, err := pollUntil(t, src, func(evs []cdc.Event) bool { return len(evs) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpointOf(evs[len(evs)-1].Pos, src.Identity())
	src.Close()
	for name, tc := range map[string]struct {
		edit  func(*Config)
		words []string
	}{
		"collections": {func(c *Config) { c.Collections = []string{"*"} }, []string{`collections is "[\"orders\",\"c*\"]" in the checkpoint`, "other collections"}},
		"exclude":     {func(c *Config) { c.Exclude = nil }, []string{"exclude is", "other collections"}},
		"database": {func(c *Config) {
			c.Database, c.Collections, c.Exclude = "", []string{"shop.orders", "shop.c*"}, []string{"shop.cust"}
		}, []string{"database is"}},
		"one collection": {func(c *Config) { c.Collections, c.Exclude, c.Collection = nil, nil, "orders" }, []string{"collection is"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			tc.edit(&c)
			s := New(c)
			defer s.Close()
			wantErr(t, s.Open(t.Context(), &cp), ErrIdentity, append(tc.words, "tide checkpoint reset")...)
		})
	}
}

// Writes to collections that are not captured advance the checkpoint
// through markers, which resume.
func TestMultiIdleMarkersAdvance(t *testing.T) {
	e := newMultiEnv(t, "shop.orders", "shop.tmp")
	cfg := e.config(t, "shop", "orders")
	src := openSource(t, cfg, nil)
	n := 0
	var first cdc.Timestamp
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		n++
		insert(t, e.coll("shop.tmp"), n)
		if len(evs) == 0 || evs[len(evs)-1].Op != cdc.OpMarker {
			return false
		}
		if first.T == 0 {
			first, _ = positionTime(evs[0].Pos)
		}
		ts, _ := positionTime(evs[len(evs)-1].Pos)
		return n > 3 && ts.T > first.T
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(nonMarkers(got)) != 0 {
		t.Fatalf("events of an uncaptured collection: %v", changes(t, got))
	}
	last := got[len(got)-1]
	if _, ok := positionEpoch(last.Pos); !ok {
		t.Fatalf("marker %s names no catalog", last.Pos)
	}
	cp := checkpointOf(last.Pos, src.Identity())
	insert(t, e.coll("shop.orders"), 7)
	again := openSource(t, cfg, &cp)
	evs, err := pollUntil(t, again, countOps(1))
	if err != nil {
		t.Fatal(err)
	}
	wantChanges(t, changes(t, evs), ins("shop.orders", 7))
}

// A pipeline that hides DDL cannot make the source mix two collections
// of one name: an event of another UUID stops it.
func TestMultiHiddenRecreateStops(t *testing.T) {
	e := newMultiEnv(t, "shop.orders")
	cfg := e.config(t, "shop", "*")
	cfg.Pipeline = `[{"$match": {"operationType": "insert"}}]`
	src := openSource(t, cfg, nil)
	insert(t, e.coll("shop.orders"), 1)
	if err := e.coll("shop.orders").Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	insert(t, e.coll("shop.orders"), 2)
	evs, err := pollUntil(t, src, func([]cdc.Event) bool { return false })
	wantErr(t, err, ErrIdentity, "insert event of shop.orders comes from collection UUID", "filters out drop")
	wantChanges(t, changes(t, evs), ins("shop.orders", 1))
}
