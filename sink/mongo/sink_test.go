package mongo_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
)

// open returns an opened sink with cfg (URI and Pipeline filled in).
func open(t *testing.T, uri string, cfg mongosink.Config) *mongosink.Sink {
	t.Helper()
	cfg.URI = uri
	if cfg.Pipeline == "" {
		cfg.Pipeline = "p"
	}
	cfg.Logger = testLogger(t)
	s := mongosink.New(cfg)
	t.Cleanup(func() { s.Close() })
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func commit(t *testing.T, s *mongosink.Sink, recs []cdc.Record) {
	t.Helper()
	if err := s.Put(t.Context(), recs); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{Source: recs[len(recs)-1].Pos}); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// TestMirror: inserts, updates, replaces and deletes land as the source
// has them, the last change of a document in a batch decides, and a
// replay of the batches changes nothing.
func TestMirror(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	s := open(t, srv.URI(), mongosink.Config{})
	b1 := records(0,
		change{cdc.OpInsert, "shop.orders", 1, 10},
		change{cdc.OpInsert, "shop.orders", 2, 20},
		change{cdc.OpUpdate, "shop.orders", 1, 11},
		change{cdc.OpInsert, "shop.orders", 3, 30},
		change{cdc.OpDelete, "shop.orders", 3, 0},
		change{cdc.OpSnapshot, "shop.users", 7, 70},
		change{cdc.OpUpdate, "shop.orders", 2, -1}, // no full document: deleted since; changes nothing
	)
	b2 := records(len(b1),
		change{cdc.OpReplace, "shop.orders", 2, 22},
		change{cdc.OpDelete, "shop.orders", 1, 0},
		change{cdc.OpInsert, "shop.orders", 1, 12},
		change{cdc.OpDelete, "shop.users", 7, 0},
	)
	commit(t, s, b1)
	want := map[int64]int{1: 11, 2: 20}
	if got := docs(t, c, "shop", "orders"); !maps.Equal(got, want) {
		t.Fatalf("after batch 1: shop.orders %v, want %v", got, want)
	}
	commit(t, s, b2)
	want = map[int64]int{1: 12, 2: 22}
	for range 2 { // and after a replay of both batches
		if got := docs(t, c, "shop", "orders"); !maps.Equal(got, want) {
			t.Fatalf("shop.orders %v, want %v", got, want)
		}
		if n := count(t, c, "shop", "users"); n != 0 {
			t.Fatalf("shop.users holds %d documents, want 0", n)
		}
		commit(t, s, b1)
		commit(t, s, b2)
	}
}

// TestMirrorRefusesInsertWithoutDocument: an insert without its full
// document cannot be mirrored, and Put says which.
func TestMirrorRefusesInsertWithoutDocument(t *testing.T) {
	srv := testenv.MongoWire(t)
	s := open(t, srv.URI(), mongosink.Config{})
	err := s.Put(t.Context(), records(0, change{cdc.OpInsert, "shop.orders", 1, -1}))
	if err == nil || !strings.Contains(err.Error(), "insert event on shop.orders") || !strings.Contains(err.Error(), "no full document") {
		t.Fatalf("Put = %v, want an error naming the event and the missing full document", err)
	}
}

// TestAppend: each record becomes one BSON document; a replay adds none.
func TestAppend(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	for _, ordered := range []bool{true, false} {
		s := open(t, srv.URI(), mongosink.Config{Mode: mongosink.ModeAppend, Database: "lake", Collection: "events", Ordered: &ordered})
		batch := records(0,
			change{cdc.OpInsert, "shop.orders", 1, 10},
			change{cdc.OpUpdate, "shop.orders", 1, 11},
			change{cdc.OpDelete, "shop.orders", 1, 0},
		)
		commit(t, s, batch)
		commit(t, s, batch[1:]) // a replay of part of it
		commit(t, s, batch)
		if n := count(t, c, "lake", "events"); n != 3 {
			t.Fatalf("ordered=%v: lake.events holds %d documents, want 3", ordered, n)
		}
		var doc bson.Raw
		if err := c.Database("lake").Collection("events").FindOne(t.Context(), bson.D{{Key: "_op", Value: "update"}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if id, _ := doc.Lookup("_id").StringValueOK(); id != `p {"t":1}` {
			t.Errorf("_id %q, want the pipeline and the position", id)
		}
		if n, ok := doc.Lookup("_full_document", "n").Int32OK(); !ok || n != 11 {
			t.Errorf("_full_document.n = %v, want the BSON int32 11; document %s", doc.Lookup("_full_document"), doc)
		}
		if ts, _, ok := doc.Lookup("_cluster_time").TimestampOK(); !ok || ts != 1700000000 {
			t.Errorf("_cluster_time = %v, want a BSON timestamp", doc.Lookup("_cluster_time"))
		}
		if _, err := c.Database("lake").Collection("events").DeleteMany(t.Context(), bson.D{}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

// TestAppendJSONPayload: a NATS message's JSON payload is stored as BSON.
func TestAppendJSONPayload(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	s := open(t, srv.URI(), mongosink.Config{Mode: mongosink.ModeAppend, Database: "lake", Collection: "msgs"})
	recs := []cdc.Record{
		{Event: cdc.Event{Pos: cdc.Position("1"), Op: cdc.OpInsert, Namespace: "orders.created", Payload: []byte(`{"sku":"a","qty":2}`), PayloadFormat: cdc.PayloadJSON,
			Headers: map[string][]string{"k": {"v"}}}},
		{Event: cdc.Event{Pos: cdc.Position("2"), Op: cdc.OpInsert, Namespace: "orders.created", Payload: []byte(`hello`), PayloadFormat: cdc.PayloadString}},
	}
	commit(t, s, recs)
	var doc bson.Raw
	if err := c.Database("lake").Collection("msgs").FindOne(t.Context(), bson.D{{Key: "_id", Value: "p 1"}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if qty, ok := doc.Lookup("_full_document", "qty").AsInt64OK(); !ok || qty != 2 {
		t.Errorf("_full_document = %s, want the payload as a document", doc.Lookup("_full_document"))
	}
	if v, _ := doc.Lookup("_headers", "k", "0").StringValueOK(); v != "v" {
		t.Errorf("_headers = %s, want {k: [v]}", doc.Lookup("_headers"))
	}
}

// TestRouting: {db} and {coll} route each namespace to its own target.
func TestRouting(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	s := open(t, srv.URI(), mongosink.Config{Database: "copy_{db}", Collection: "{coll}_v2"})
	commit(t, s, records(0, change{cdc.OpInsert, "a.x", 1, 1}, change{cdc.OpInsert, "b.y", 2, 2}))
	if got := docs(t, c, "copy_a", "x_v2"); !maps.Equal(got, map[int64]int{1: 1}) {
		t.Errorf("copy_a.x_v2 = %v", got)
	}
	if got := docs(t, c, "copy_b", "y_v2"); !maps.Equal(got, map[int64]int{2: 2}) {
		t.Errorf("copy_b.y_v2 = %v", got)
	}
	err := s.Put(t.Context(), records(2, change{cdc.OpInsert, "nodot", 3, 3}))
	if err == nil || !strings.Contains(err.Error(), `namespace "nodot" has no collection name to fill {coll}`) {
		t.Errorf("Put of a namespace without a collection = %v", err)
	}
}

// TestDDL: a drop and a rename are applied with apply_ddl, and only
// counted without it.
func TestDDL(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	rename := func(i int, from, to string) cdc.Record {
		r := record(i, change{op: cdc.OpRename, ns: from})
		db, coll, _ := strings.Cut(to, ".")
		r.Extra = marshal(bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: db}, {Key: "coll", Value: coll}}}})
		return r
	}
	for _, apply := range []bool{false, true} {
		if err := c.Database("d").Drop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s := open(t, srv.URI(), mongosink.Config{ApplyDDL: apply})
		batch := records(0, change{cdc.OpInsert, "d.a", 1, 1}, change{cdc.OpInsert, "d.b", 2, 2})
		batch = append(batch, rename(2, "d.a", "d.c"), record(3, change{op: cdc.OpDrop, ns: "d.b"}), record(4, change{cdc.OpInsert, "d.c", 3, 3}))
		batch = append(batch, rename(5, "d.gone", "d.e")) // a replayed rename: its source is gone
		commit(t, s, batch)
		names, err := c.Database("d").ListCollectionNames(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(sorted(names), ",")
		want, stats := "a,b,c", mongosink.Stats{DDLSkipped: 3}
		if apply {
			want, stats = "c", mongosink.Stats{DDLApplied: 3}
		}
		if got != want {
			t.Errorf("apply_ddl=%v: collections %s, want %s", apply, got, want)
		}
		if st := s.Stats(); st.DDLSkipped != stats.DDLSkipped || st.DDLApplied != stats.DDLApplied {
			t.Errorf("apply_ddl=%v: stats %+v, want %+v", apply, st, stats)
		}
		if apply {
			if got := docs(t, c, "d", "c"); !maps.Equal(got, map[int64]int{1: 1, 3: 3}) {
				t.Errorf("d.c = %v, want the renamed d.a and the insert after", got)
			}
		}
		s.Close()
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestRefusedDocument: a document the target refuses fails the commit,
// naming the namespace and _id; with on_write_error: dead_letter it goes
// to the dead-letter collection, and the rest is written.
func TestRefusedDocument(t *testing.T) {
	srv := testenv.MongoWire(t)
	c := testenv.MongoClient(t, srv.URI())
	// A unique index on n: the target refuses a second document with n 1.
	if _, err := c.Database("shop").Collection("orders").Indexes().CreateOne(t.Context(),
		mongoIndex(bson.D{{Key: "n", Value: 1}})); err != nil {
		t.Fatal(err)
	}
	batch := records(0, change{cdc.OpInsert, "shop.orders", 1, 1}, change{cdc.OpInsert, "shop.orders", 2, 1}, change{cdc.OpInsert, "shop.orders", 3, 3})

	s := open(t, srv.URI(), mongosink.Config{})
	if err := s.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(t.Context(), cdc.Checkpoint{Source: batch[2].Pos})
	if err == nil || !strings.Contains(err.Error(), "shop.orders refused") || !strings.Contains(err.Error(), "_id 2") {
		t.Fatalf("Commit = %v, want an error naming shop.orders and _id 2", err)
	}
	s.Close()

	s = open(t, srv.URI(), mongosink.Config{OnWriteError: mongosink.OnWriteErrorDeadLetter, DeadLetter: "ops.rejects"})
	commit(t, s, batch)
	if got := docs(t, c, "shop", "orders"); !maps.Equal(got, map[int64]int{1: 1, 3: 3}) {
		t.Errorf("shop.orders = %v", got)
	}
	var dl bson.Raw
	if err := c.Database("ops").Collection("rejects").FindOne(t.Context(), bson.D{}).Decode(&dl); err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	if id, _ := dl.Lookup("document_key", "_id").AsInt64OK(); id != 2 || !strings.Contains(dl.Lookup("error").StringValue(), "11000") {
		t.Errorf("dead letter %s, want _id 2 and the error", dl)
	}
	if n := s.Stats().DeadLettered; n != 1 {
		t.Errorf("Stats().DeadLettered = %d, want 1", n)
	}
}

// TestOpenErrors: an unreachable server and a refused password are
// clear, and never show the password.
func TestOpenErrors(t *testing.T) {
	srv := testenv.MongoWire(t, func(c *mongowire.Config) { c.Auth, c.AdminUser, c.AdminPassword = true, "root", "right" })
	host := strings.TrimPrefix(strings.SplitN(srv.URI(), "/?", 2)[0], "mongodb://")
	tests := map[string]struct {
		uri  string
		want string
	}{
		"unreachable": {"mongodb://u:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=300", "server unreachable"},
		"bad password": {"mongodb://root:s3cret@" + strings.TrimSuffix(host, "/") + "/?authSource=admin&directConnection=true",
			"authentication refused"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := mongosink.New(mongosink.Config{URI: tc.uri, Pipeline: "p"})
			err := s.Open(t.Context(), nil)
			s.Close()
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "u:xxxxx@") && !strings.Contains(err.Error(), "root:xxxxx@") {
				t.Errorf("Open = %v, want %q and the URI with its password hidden", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open = %v: shows the password", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		cfg  mongosink.Config
		want string
	}{
		"no uri":        {mongosink.Config{}, "uri: required"},
		"bad uri":       {mongosink.Config{URI: "http://x"}, "uri: \"http://x\" is not a MongoDB connection string"},
		"mode":          {mongosink.Config{URI: "mongodb://h", Mode: "upsert"}, `mode: "upsert" is not one of mirror, append`},
		"write concern": {mongosink.Config{URI: "mongodb://h", WriteConcern: "0"}, "write_concern: \"0\" is not majority"},
		"database":      {mongosink.Config{URI: "mongodb://h", Database: "a.b"}, "database: \"a.b\" makes database name"},
		"on error":      {mongosink.Config{URI: "mongodb://h", OnWriteError: "skip"}, `on_write_error: "skip" is not one of fail, dead_letter`},
		"dead letter":   {mongosink.Config{URI: "mongodb://h", DeadLetter: "x"}, "dead_letter: is used only with on_write_error: dead_letter"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
	if err := (mongosink.Config{URI: "mongodb://h", Database: "{db}_copy"}).Validate(); err != nil {
		t.Errorf("Validate of a good config = %v", err)
	}
	if got := mongosink.Redact("mongodb://u:p@h1:1,h2:2/db?x=1"); got != "mongodb://u:xxxxx@h1:1,h2:2/db?x=1" {
		t.Errorf("Redact = %s", got)
	}
}

// TestCollector: the sink's counters are exported, by pipeline.
func TestCollector(t *testing.T) {
	srv := testenv.MongoWire(t)
	s := open(t, srv.URI(), mongosink.Config{})
	commit(t, s, records(0, change{cdc.OpInsert, "d.a", 1, 1}, change{op: cdc.OpDrop, ns: "d.a"}))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector("p"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "tide_mongo_sink_ddl_skipped_total" {
			m := f.GetMetric()[0]
			if v := m.GetCounter().GetValue(); v != 1 || m.GetLabel()[0].GetValue() != "p" {
				t.Errorf("tide_mongo_sink_ddl_skipped_total = %v %v, want 1 for pipeline p", v, m.GetLabel())
			}
			return
		}
	}
	t.Error("no tide_mongo_sink_ddl_skipped_total")
}
