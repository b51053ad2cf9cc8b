package postgres_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// runGenerate runs a generate pipeline of count events into sink, which
// keeps the checkpoint.
func runGenerate(t testing.TB, name string, sink *postgres.Sink, count int64, payload, batch int) error {
	t.Helper()
	src := generate.New(generate.Config{Count: count, PayloadBytes: payload})
	p := pipeline.New(pipeline.Config{Name: name, MaxRecords: batch, Logger: testLogger(t)}, src, encode.Envelope, sink, sink.Checkpoints())
	return p.Run(t.Context())
}

func TestGenerateMirror(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "events", Mode: postgres.ModeMirror, CreateTable: true, SoftDelete: true,
		Pipeline: "gen", Logger: testLogger(t)}
	const n = 5000
	if err := runGenerate(t, "gen", postgres.New(cfg), n, 50, 700); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := queryInt(t, c, `SELECT count(*) FROM events`); got != n {
		t.Errorf("rows = %d, want %d", got, n)
	}
	if got := queryInt(t, c, `SELECT count(*) FROM events WHERE _tide_op = 'insert' AND NOT _tide_deleted
		AND (doc->>'seq')::bigint = (doc->>'_id')::bigint AND length(doc->>'payload') = 50 AND _tide_cluster_time >> 32 > 0`); got != n {
		t.Errorf("rows with the expected content = %d, want %d", got, n)
	}
	var id, doc string
	if err := c.QueryRow(t.Context(), `SELECT _id, doc::text FROM events WHERE _id = $1`, `{"_id":{"$numberLong":"42"}}`).Scan(&id, &doc); err != nil {
		t.Fatalf("row of document 42 by its canonical key: %v", err)
	}
	if want := `{"_id": 42, "seq": 42, "payload": "` + strings.Repeat("x", 50) + `"}`; doc != want {
		t.Errorf("doc 42 = %s, want %s", doc, want)
	}
	if got := checkpointSeq(t, c, "gen"); got != n {
		t.Errorf("checkpoint seq = %d, want %d", got, n)
	}

	// A second run resumes from the checkpoint row: nothing more to do.
	if err := runGenerate(t, "gen", postgres.New(cfg), n, 50, 700); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got := queryInt(t, c, `SELECT count(*) FROM events`); got != n {
		t.Errorf("rows after a second run = %d, want %d", got, n)
	}
	ps := postgres.New(cfg)
	defer ps.Close()
	cp, err := ps.Checkpoints().Load(t.Context(), "gen")
	if err != nil {
		t.Fatal(err)
	}
	if string(cp.Source) != fmt.Sprintf(`{"seq": %d}`, n) {
		t.Errorf("loaded checkpoint position = %s, want {\"seq\": %d}", cp.Source, n)
	}
}

func TestGenerateAppend(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "log", Mode: postgres.ModeAppend, CreateTable: true,
		Pipeline: "app", Logger: testLogger(t)}
	const n = 3000
	if err := runGenerate(t, "app", postgres.New(cfg), n, 20, 400); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := queryInt(t, c, `SELECT count(*) FROM log`); got != n {
		t.Errorf("rows = %d, want %d", got, n)
	}
	// One row per event, in event order, with the envelope's columns.
	if got := queryInt(t, c, `SELECT count(*) FROM log WHERE id = (_full_document->>'seq')::bigint
		AND _namespace = 'gen.events' AND _op = 'insert' AND _document_key = jsonb_build_object('_id', id)
		AND _cluster_time_i = id AND _cluster_time_s > 0 AND _wall_time_ms > 0
		AND _resume_token IS NULL AND _update_desc IS NULL AND _before IS NULL`); got != n {
		t.Errorf("rows with the expected columns = %d, want %d", got, n)
	}
	if got := checkpointSeq(t, c, "app"); got != n {
		t.Errorf("checkpoint seq = %d, want %d", got, n)
	}
}

// TestMirrorOperations checks how each operation lands in the mirror, that
// only the last event of a batch for a key counts, and that an older
// cluster time never overwrites a row.
func TestMirrorOperations(t *testing.T) {
	for _, soft := range []bool{true, false} {
		t.Run(fmt.Sprintf("soft_delete=%v", soft), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, SoftDelete: soft})
			v := func(n int) bson.D { return bson.D{{Key: "v", Value: n}} }
			oid := bson.NewObjectID()

			batches := [][]cdc.Record{{
				event(t, cdc.OpInsert, "a", v(1), 10, 1, `1`),
				event(t, cdc.OpInsert, "b", v(1), 10, 2, `2`),
				event(t, cdc.OpSnapshot, oid, v(1), 10, 3, `3`),
				event(t, cdc.OpInsert, int64(7), v(1), 10, 4, `4`),
			}, {
				event(t, cdc.OpUpdate, "a", v(2), 11, 1, `5`),
				event(t, cdc.OpDelete, "b", nil, 11, 2, `6`),
				event(t, cdc.OpUpdate, oid, v(2), 11, 3, `7`),
				event(t, cdc.OpReplace, oid, v(3), 11, 4, `8`), // the last for oid: it decides
				event(t, cdc.OpDelete, int64(7), nil, 11, 5, `9`),
				event(t, cdc.OpInsert, int64(7), v(9), 11, 6, `10`), // re-inserted in the same batch
				event(t, cdc.OpDrop, nil, nil, 11, 7, `11`),         // no document: nothing to mirror
			}, {
				event(t, cdc.OpUpdate, "a", v(0), 9, 1, `12`), // older than the row: ignored
				event(t, cdc.OpInsert, "b", v(0), 9, 2, `13`), // older than the delete: ignored when soft
				event(t, cdc.OpDelete, "never", nil, 12, 1, `14`),
			}}
			for i, b := range batches {
				if err := writeBatch(t, s, cdc.Checkpoint{}, b...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}

			type want struct {
				v       string // doc->>'v', "" for NULL
				op      string
				deleted bool
			}
			wants := map[string]want{
				`{"_id":"a"}`: {"2", "update", false},
				fmt.Sprintf(`{"_id":{"$oid":"%s"}}`, oid.Hex()): {"3", "replace", false},
				`{"_id":{"$numberLong":"7"}}`:                   {"9", "insert", false},
			}
			if soft {
				wants[`{"_id":"b"}`] = want{"1", "delete", true}
				wants[`{"_id":"never"}`] = want{"", "delete", true}
			} else {
				wants[`{"_id":"b"}`] = want{"0", "insert", false} // a hard delete leaves no guard behind
			}
			rows, err := c.Query(t.Context(), `SELECT _id, coalesce(doc->>'v', ''), _tide_op, _tide_deleted FROM orders`)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]want{}
			for rows.Next() {
				var id string
				var w want
				if err := rows.Scan(&id, &w.v, &w.op, &w.deleted); err != nil {
					t.Fatal(err)
				}
				got[id] = w
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(wants) {
				t.Errorf("rows:\n got %v\nwant %v", got, wants)
			}
			if ct := queryInt(t, c, `SELECT _tide_cluster_time FROM orders WHERE _id = '{"_id":"a"}'`); ct != 11<<32|1 {
				t.Errorf("cluster time of a = %#x, want %#x", ct, int64(11<<32|1))
			}
		})
	}
}

// TestBadInput: each problem is a clear error when the pipeline starts,
// before the source is opened or read.
func TestBadInput(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	if _, err := c.Exec(t.Context(), `CREATE TABLE wrong (_id integer, doc text, _tide_op text, extra text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), `CREATE TABLE nokey (_id text, doc jsonb, _tide_op text, _tide_cluster_time bigint,
		_tide_deleted boolean, _tide_synced_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dsn)
	wrongPassword := *u
	wrongPassword.User = url.UserPassword("postgres", "not-the-password")
	closed := *u
	closed.Host = "127.0.0.1:" + closedPort(t)

	tests := map[string]struct {
		cfg  postgres.Config
		want []string
	}{
		// Unreachable is transient: retried for RetryTimeout (the
		// pipeline's retry.max_elapsed, forever by default), then given up.
		"unreachable server": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: closed.String(), Table: "t", CreateTable: true, RetryTimeout: time.Second},
			[]string{"postgres sink: connect", "giving up after", "connection refused"}},
		"wrong password": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: wrongPassword.String(), Table: "t", CreateTable: true},
			[]string{"postgres sink: connect", "password authentication failed"}},
		"malformed dsn": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: "postgres://host:notaport/db", Table: "t"},
			[]string{"postgres sink: dsn"}},
		"incompatible table": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "wrong", CreateTable: true},
			[]string{`table "public"."wrong" is not compatible with mirror mode`, "column _id is integer, want text",
				"column doc is text, want jsonb", "column _tide_cluster_time is missing (want bigint)",
				"column extra is NOT NULL without a default"}},
		"no primary key": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "nokey"},
			[]string{"column _id has no primary key or unique index"}},
		"missing table without create_table": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "absent"},
			[]string{`table "public"."absent" does not exist, and create_table is false`}},
		"append into a mirror table": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "nokey", Mode: postgres.ModeAppend},
			[]string{"not compatible with append mode", "column id is missing"}},
		"unknown mode": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "t", Mode: "merge"},
			[]string{`mode: "merge" is not one of mirror, append`}},
		"no table": {postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn},
			[]string{"table: required"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Logger = testLogger(t)
			src := &spySource{Source: generate.New(generate.Config{Count: 10})}
			p := pipeline.New(pipeline.Config{Name: "bad"}, src, encode.Envelope, postgres.New(tc.cfg), nil)
			err := p.Run(t.Context())
			if err == nil {
				t.Fatal("run succeeded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "not-the-password") || strings.Contains(err.Error(), testenv.PostgresPassword) {
				t.Errorf("error %q shows a password", err)
			}
			if src.opened || src.polled {
				t.Errorf("source opened=%v polled=%v; want neither", src.opened, src.polled)
			}
		})
	}
}

// spySource records whether the runtime opened or polled the real
// generator it wraps.
type spySource struct {
	*generate.Source
	opened, polled bool
}

func (s *spySource) Open(ctx context.Context, cp *cdc.Checkpoint) error {
	s.opened = true
	return s.Source.Open(ctx, cp)
}

func (s *spySource) Poll(ctx context.Context, buf []cdc.Event, max int) ([]cdc.Event, error) {
	s.polled = true
	return s.Source.Poll(ctx, buf, max)
}

func closedPort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

// TestMirrorNeedsFullDocuments: an insert or replace without a full
// document, or an event without a document key, is refused. An update
// without one (a looked-up document deleted since) changes nothing.
func TestMirrorNeedsFullDocuments(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true})
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, "a", bson.D{{Key: "v", Value: 1}}, 1, 1, `1`)); err != nil {
		t.Fatal(err)
	}
	gone := event(t, cdc.OpUpdate, "a", nil, 2, 1, `2`)
	gone.UpdateDesc, _ = bson.Marshal(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "v", Value: 2}}}})
	if err := writeBatch(t, s, cdc.Checkpoint{}, gone); err != nil {
		t.Fatalf("update whose document is gone: %v", err)
	}
	if v := queryInt(t, c, `SELECT (doc->>'v')::bigint FROM orders WHERE _id = '{"_id":"a"}'`); v != 1 {
		t.Errorf("v = %d after an update without a document, want 1 (unchanged)", v)
	}

	err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpReplace, "a", nil, 3, 1, `3`))
	if err == nil || !strings.Contains(err.Error(), "full_document") || !strings.Contains(err.Error(), `{"_id":"a"}`) {
		t.Errorf("replace without a full document: error %v; want one naming full_document and the key", err)
	}
	msg := cdc.Record{Event: cdc.Event{Op: cdc.OpInsert, Namespace: "orders.new", Payload: []byte(`{}`), PayloadFormat: cdc.PayloadJSON}}
	msg.FullDocument = []byte{5, 0, 0, 0, 0}
	if err := writeBatch(t, s, cdc.Checkpoint{}, msg); err == nil || !strings.Contains(err.Error(), "no document key") {
		t.Errorf("message event into mirror: error %v; want one saying it has no document key", err)
	}
}

// TestServerErrorsFailTheBatch: a value PostgreSQL refuses, or a unique
// violation, rolls the whole batch back and fails with the statement and
// the offending document key; the sink is not retried into a loop.
func TestServerErrorsFailTheBatch(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openKeepingSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, SoftDelete: true,
		Pipeline: "p"})
	if _, err := c.Exec(t.Context(), `CREATE UNIQUE INDEX orders_email ON orders ((doc->>'email'))`); err != nil {
		t.Fatal(err)
	}
	if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":1}`)},
		event(t, cdc.OpInsert, "a", bson.D{{Key: "email", Value: "x@example.com"}}, 1, 1, `{"n":1}`)); err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		recs []cdc.Record
		want []string
	}{
		"unique violation": {
			recs: []cdc.Record{
				event(t, cdc.OpInsert, "b", bson.D{{Key: "email", Value: "y@example.com"}}, 2, 1, `{"n":2}`),
				event(t, cdc.OpInsert, "c", bson.D{{Key: "email", Value: "x@example.com"}}, 2, 2, `{"n":3}`),
			},
			want: []string{`upsert into "public"."orders"`, `(document key {"_id":"c"})`, "23505", "statement: INSERT INTO"},
		},
		"value jsonb refuses": {
			recs: []cdc.Record{
				event(t, cdc.OpInsert, "d", bson.D{{Key: "s", Value: "ok"}}, 2, 1, `{"n":2}`),
				event(t, cdc.OpInsert, "e", bson.D{{Key: "s", Value: "nul\x00byte"}}, 2, 2, `{"n":3}`),
			},
			want: []string{"copy into staging table", `(document key {"_id":"e"})`, "22P05"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":3}`)}, tc.recs...)
			if err == nil {
				t.Fatal("batch succeeded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			if n := queryInt(t, c, `SELECT count(*) FROM orders`); n != 1 {
				t.Errorf("rows after the failed batch = %d, want 1: the batch must roll back whole", n)
			}
			var pos string
			if err := c.QueryRow(t.Context(), `SELECT checkpoint->>'source' FROM tide_checkpoints WHERE pipeline = 'p'`).Scan(&pos); err != nil {
				t.Fatal(err)
			}
			if pos != `{"n": 1}` {
				t.Errorf("checkpoint after the failed batch = %s, want {\"n\": 1}", pos)
			}
		})
	}
	// The sink still works after a failed batch.
	if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":4}`)},
		event(t, cdc.OpInsert, "f", bson.D{{Key: "email", Value: "z@example.com"}}, 3, 1, `{"n":4}`)); err != nil {
		t.Fatalf("batch after failures: %v", err)
	}
}

func TestCheckpointPositions(t *testing.T) {
	dsn := testenv.Postgres(t)
	cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p"}
	tests := map[string]cdc.Checkpoint{
		"json position":     {Source: cdc.Position(`{"_data":"8263"}`), Meta: map[string]string{"uuid": "u1"}},
		"non-json position": {Source: cdc.Position("not json"), Sink: []byte(`{"len":3}`)},
		"no position":       {Meta: map[string]string{"a": "b"}},
	}
	for name, cp := range tests {
		t.Run(name, func(t *testing.T) {
			s := postgres.New(cfg)
			if _, err := s.Checkpoints().Load(t.Context(), "p"); err != nil {
				t.Fatal(err)
			}
			if err := s.Open(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			// A batch of markers: Commit without Put.
			if err := s.Commit(t.Context(), cp); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ps := postgres.New(cfg)
			defer ps.Close()
			got, err := ps.Checkpoints().Load(t.Context(), "p")
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(string(got.Source), string(cp.Source)) || fmt.Sprint(got.Meta) != fmt.Sprint(cp.Meta) || !jsonEqual(string(got.Sink), string(cp.Sink)) {
				t.Errorf("loaded %+v (source %s, sink %s), want %+v", got, got.Source, got.Sink, cp)
			}
		})
	}
	if _, err := postgres.New(cfg).Checkpoints().Load(t.Context(), "other"); err == nil ||
		!strings.Contains(err.Error(), `pipeline "other"`) {
		t.Errorf("checkpoint of another pipeline: error %v, want one naming it", err)
	}
}

// TestCheckpointsIsTheOneSwitch: a sink writes the checkpoint row only
// after Checkpoints was called, and its store's Save accepts only a
// checkpoint that a Commit of the sink wrote.
func TestCheckpointsIsTheOneSwitch(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	plain := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p"})
	cp1 := cdc.Checkpoint{Source: cdc.Position(`{"n":1}`)}
	if err := writeBatch(t, plain, cp1, event(t, cdc.OpInsert, "a", bson.D{{Key: "v", Value: 1}}, 1, 1, `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM pg_tables WHERE tablename = 'tide_checkpoints'`); n != 0 {
		t.Errorf("a sink without Checkpoints created tide_checkpoints")
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}

	s := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p", Logger: testLogger(t)})
	defer s.Close()
	store := s.Checkpoints()
	if store != s.Checkpoints() {
		t.Error("Checkpoints returned another store the second time")
	}
	if cp, err := store.Load(t.Context(), "p"); err != nil || cp != nil {
		t.Fatalf("Load before any commit = %v, %v; want nil, nil", cp, err)
	}
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cp2 := cdc.Checkpoint{Source: cdc.Position(`{"n":2}`)}
	if err := writeBatch(t, s, cp2, event(t, cdc.OpInsert, "b", bson.D{{Key: "v", Value: 2}}, 2, 1, `{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	if got := checkpointSource(t, c, "p"); got != `{"n": 2}` {
		t.Errorf("checkpoint row after Commit = %s, want {\"n\": 2}: Commit writes it", got)
	}
	if err := store.Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(`{"n":3}`)}); err == nil ||
		!strings.Contains(err.Error(), "not committed by this sink") {
		t.Errorf("Save of a checkpoint never committed: %v, want a refusal", err)
	}
	if err := store.Save(t.Context(), "other", cp2); err == nil || !strings.Contains(err.Error(), `pipeline "other"`) {
		t.Errorf("Save for another pipeline: %v, want a refusal naming it", err)
	}
	if err := store.Save(t.Context(), "p", cp2); err != nil {
		t.Errorf("Save of the committed checkpoint: %v", err)
	}
	if got := checkpointSource(t, c, "p"); got != `{"n": 2}` {
		t.Errorf("checkpoint row after Save = %s, want {\"n\": 2}", got)
	}
}

func checkpointSource(t testing.TB, c *pgx.Conn, pipeline string) string {
	t.Helper()
	var pos string
	if err := c.QueryRow(t.Context(), `SELECT checkpoint->>'source' FROM tide_checkpoints WHERE pipeline = $1`, pipeline).Scan(&pos); err != nil {
		t.Fatalf("read checkpoint row of %s: %v", pipeline, err)
	}
	return pos
}

// jsonEqual compares JSON texts ignoring the spacing jsonb adds, and
// other texts exactly.
func jsonEqual(a, b string) bool {
	norm := func(s string) string { return strings.ReplaceAll(s, " ", "") }
	return norm(a) == norm(b)
}

// TestOneWriterPerPipeline: while one sink holds a pipeline's checkpoint,
// a second one is refused; once the first closes, the second proceeds.
func TestOneWriterPerPipeline(t *testing.T) {
	dsn := testenv.Postgres(t)
	cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p",
		LockTimeout: 200 * time.Millisecond, Logger: testLogger(t)}
	first := postgres.New(cfg)
	if _, err := first.Checkpoints().Load(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	second := postgres.New(cfg)
	_, err := second.Checkpoints().Load(t.Context(), "p")
	if err == nil || !strings.Contains(err.Error(), `pipeline "p" is being written by another session`) {
		t.Fatalf("second writer: error %v, want a refusal naming the pipeline", err)
	}
	second.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// The first session's lock goes when its server process ends, which
	// follows the client's close by a moment: wait for it longer than the
	// refusal above did.
	cfg.LockTimeout = 10 * time.Second
	third := postgres.New(cfg)
	defer third.Close()
	if _, err := third.Checkpoints().Load(t.Context(), "p"); err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
}

// TestReadCheckpointTakesNoLock: ReadCheckpoint (tide checkpoint show)
// reads the row while a sink holds the pipeline's lock, and reports no
// checkpoint before tide_checkpoints exists.
func TestReadCheckpointTakesNoLock(t *testing.T) {
	dsn := testenv.Postgres(t)
	cfg := postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p"}
	if cp, err := postgres.ReadCheckpoint(t.Context(), cfg); err != nil || cp != nil {
		t.Fatalf("before any table exists: %v, %v; want nil, nil", cp, err)
	}
	s := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "orders", CreateTable: true, Pipeline: "p", Logger: testLogger(t)})
	defer s.Close()
	store := s.Checkpoints()
	if _, err := store.Load(t.Context(), "p"); err != nil { // takes the pipeline's lock
		t.Fatal(err)
	}
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cp := cdc.Checkpoint{Source: cdc.Position(`{"n":1}`)}
	if err := writeBatch(t, s, cp, event(t, cdc.OpInsert, "a", bson.D{{Key: "v", Value: 1}}, 1, 1, `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got, err := postgres.ReadCheckpoint(ctx, cfg)
	if err != nil || got == nil || !cdctest.SamePosition(got.Source, cp.Source) {
		t.Fatalf("while the sink holds the lock: %v, %v; want %s", got, err, cp.Source)
	}
}
