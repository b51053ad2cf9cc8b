package postgres_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// nsEvent is event in namespace ns.
func nsEvent(t testing.TB, ns string, op cdc.Op, id any, doc bson.D, ts, inc uint32, pos string) cdc.Record {
	t.Helper()
	r := event(t, op, id, doc, ts, inc, pos)
	r.Namespace = ns
	data, err := encode.Envelope(nil, &r.Event)
	if err != nil {
		t.Fatal(err)
	}
	r.Data = data
	return r
}

// longColl is a collection name whose table name passes PostgreSQL's
// 63-byte limit.
var longColl = strings.Repeat("long_collection_name_", 4)

// TestTemplatedMirror routes three collections, one with a name that is
// not a plain identifier and one too long for one, to a table each, with
// the checkpoint in the same transaction; a document key shared by two
// collections is two rows; a drop changes nothing.
func TestTemplatedMirror(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openKeepingSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "{coll}", CreateTable: true, SoftDelete: false, Pipeline: "routed"})
	odd := `Odd "name"; DROP TABLE x`
	v := func(n int) bson.D { return bson.D{{Key: "v", Value: n}} }
	batches := [][]cdc.Record{{
		nsEvent(t, "shop.orders", cdc.OpInsert, 1, v(1), 10, 1, `{"seq":1}`),
		nsEvent(t, "shop."+odd, cdc.OpInsert, 1, v(10), 10, 2, `{"seq":2}`),
		nsEvent(t, "shop.orders", cdc.OpInsert, 2, v(2), 10, 3, `{"seq":3}`),
		nsEvent(t, "shop."+longColl, cdc.OpInsert, 1, v(100), 10, 4, `{"seq":4}`),
	}, {
		nsEvent(t, "shop.orders", cdc.OpUpdate, 1, v(3), 11, 1, `{"seq":5}`),
		nsEvent(t, "shop."+odd, cdc.OpDelete, 1, nil, 11, 2, `{"seq":6}`),
		nsEvent(t, "shop."+odd, cdc.OpInsert, 2, v(20), 11, 3, `{"seq":7}`),
		nsEvent(t, "shop.gone", cdc.OpDrop, nil, nil, 11, 4, `{"seq":8}`),
	}}
	for i, b := range batches {
		next := cdc.Checkpoint{Source: b[len(b)-1].Pos}
		if err := writeBatch(t, s, next, b...); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	long := longColl[:54] + "_"
	var longTable string
	if err := c.QueryRow(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE $1`, long+"%").Scan(&longTable); err != nil {
		t.Fatalf("no table for the long collection name (want %s and 8 hex digits): %v", long, err)
	}
	if len(longTable) != 63 {
		t.Errorf("long table name %q is %d bytes, want 63", longTable, len(longTable))
	}
	for table, want := range map[string]string{"orders": "1:3 2:2", odd: "2:20", longTable: "1:100"} {
		if got := mirrorRows(t, c, table); got != want {
			t.Errorf("table %q holds %s, want %s", table, got, want)
		}
	}
	if n := queryInt(t, c, `SELECT count(*) FROM pg_tables WHERE tablename = 'gone'`); n != 0 {
		t.Errorf("a drop event created its table")
	}
	if seq := checkpointSeq(t, c, "routed"); seq != 8 {
		t.Errorf("checkpoint at %d, want 8", seq)
	}
}

// mirrorRows lists a mirror table's rows as "_id:v", sorted by _id.
func mirrorRows(t *testing.T, c *pgx.Conn, table string) string {
	t.Helper()
	rows, err := c.Query(t.Context(), `SELECT (doc->>'_id') || ':' || (doc->>'v') FROM `+pgx.Identifier{table}.Sanitize()+` ORDER BY (doc->>'_id')::int`)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestTemplatedOneTransaction: a batch whose rows for one table fail
// leaves every table, and the checkpoint, as they were.
func TestTemplatedOneTransaction(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openKeepingSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "{db}_{coll}", Mode: postgres.ModeAppend, CreateTable: true, Pipeline: "tx"})
	first := []cdc.Record{
		nsEvent(t, "a.x", cdc.OpInsert, 1, nil, 10, 1, `{"seq":1}`),
		nsEvent(t, "b.y", cdc.OpInsert, 1, nil, 10, 2, `{"seq":2}`),
	}
	if err := writeBatch(t, s, cdc.Checkpoint{Source: first[1].Pos}, first...); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'refused by the test'; END$$`,
		`CREATE TRIGGER refuse BEFORE INSERT ON b_y FOR EACH ROW EXECUTE FUNCTION refuse()`,
	} {
		if _, err := c.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	second := []cdc.Record{
		nsEvent(t, "a.x", cdc.OpInsert, 2, nil, 11, 1, `{"seq":3}`),
		nsEvent(t, "c.z", cdc.OpInsert, 1, nil, 11, 2, `{"seq":4}`),
		nsEvent(t, "b.y", cdc.OpInsert, 2, nil, 11, 3, `{"seq":5}`),
		nsEvent(t, "a.x", cdc.OpDrop, nil, nil, 11, 4, `{"seq":6}`),
	}
	err := writeBatch(t, s, cdc.Checkpoint{Source: second[3].Pos}, second...)
	if err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("batch with a refused row = %v, want the trigger's error", err)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM a_x`); n != 1 {
		t.Errorf("a_x has %d rows after the failed batch, want the first batch's 1", n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM c_z`); n != 0 {
		t.Errorf("c_z has %d rows after the failed batch, want 0", n)
	}
	if seq := checkpointSeq(t, c, "tx"); seq != 2 {
		t.Errorf("checkpoint at %d after the failed batch, want 2", seq)
	}
	if _, err := c.Exec(t.Context(), `DROP TRIGGER refuse ON b_y`); err != nil {
		t.Fatal(err)
	}
	if err := writeBatch(t, s, cdc.Checkpoint{Source: second[3].Pos}, second...); err != nil {
		t.Fatal(err)
	}
	// Append mode keeps the drop as a row of its table.
	if got := queryInt(t, c, `SELECT count(*) FROM a_x WHERE _op = 'drop'`); got != 1 {
		t.Errorf("a_x has %d drop rows, want 1", got)
	}
	if seq := checkpointSeq(t, c, "tx"); seq != 6 {
		t.Errorf("checkpoint at %d, want 6", seq)
	}
}

// TestTemplatedMissingTable: without create_table, a namespace whose
// table does not exist fails the batch, naming both.
func TestTemplatedMissingTable(t *testing.T) {
	dsn := testenv.Postgres(t)
	s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "t_{coll}"})
	err := writeBatch(t, s, cdc.Checkpoint{}, nsEvent(t, "shop.orders", cdc.OpInsert, 1, bson.D{}, 10, 1, `{"seq":1}`))
	want := `postgres sink: table "public"."t_orders" (for namespace shop.orders) does not exist, and create_table is false`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("batch for a missing table = %v, want %q", err, want)
	}
	err = writeBatch(t, s, cdc.Checkpoint{}, nsEvent(t, "nodot", cdc.OpInsert, 1, bson.D{}, 10, 1, `{"seq":1}`))
	if err == nil || !strings.Contains(err.Error(), `namespace "nodot" has no collection name to fill {coll}`) {
		t.Fatalf("batch for a namespace without a collection = %v", err)
	}
}

// TestContractTemplated runs the conformance suite on a sink with
// table: "t_{coll}", record i going to collection c<i%3>.
func TestContractTemplated(t *testing.T) {
	testenv.Postgres(t)
	var mu sync.Mutex
	dsns := map[string]string{}
	dsn := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		if dsns[t.Name()] == "" {
			dsns[t.Name()] = testenv.Postgres(t)
		}
		return dsns[t.Name()]
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink {
			return postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn(t), Table: "t_{coll}", CreateTable: true, Pipeline: cdctest.Pipeline, Logger: testLogger(t)})
		},
		Checkpoints: func(t *testing.T, s cdc.Sink) cdctest.Store { return s.(*postgres.Sink).Checkpoints() },
		Record: func(i int) cdc.Record {
			r := contractRecord(i)
			r.Namespace = "db.c" + strconv.Itoa(i%3)
			return r
		},
		Want: func(i int) []byte { return []byte("record " + strconv.Itoa(i)) },
		Committed: func(t *testing.T) [][]byte {
			c := connect(t, dsn(t))
			var parts []string
			for k := range 3 {
				var exists bool
				if err := c.QueryRow(t.Context(), fmt.Sprintf(`SELECT to_regclass('t_c%d') IS NOT NULL`, k)).Scan(&exists); err != nil {
					t.Fatal(err)
				}
				if exists {
					parts = append(parts, fmt.Sprintf(`SELECT doc FROM t_c%d`, k))
				}
			}
			if len(parts) == 0 {
				return nil
			}
			rows, err := c.Query(t.Context(), `SELECT doc->>'text' FROM (`+strings.Join(parts, " UNION ALL ")+`) d ORDER BY (doc->>'_id')::int`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out [][]byte
			for rows.Next() {
				var text string
				if err := rows.Scan(&text); err != nil {
					t.Fatal(err)
				}
				out = append(out, []byte(text))
			}
			return out
		},
	})
}

// renameEvent is a rename of ns to db.to, as the MongoDB source gives it.
func renameEvent(t testing.TB, ns, to string, ts, inc uint32, pos string) cdc.Record {
	t.Helper()
	r := nsEvent(t, ns, cdc.OpRename, nil, nil, ts, inc, pos)
	db, coll, _ := strings.Cut(to, ".")
	extra, err := bson.Marshal(bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: db}, {Key: "coll", Value: coll}}}})
	if err != nil {
		t.Fatal(err)
	}
	r.Extra = extra
	return r
}

// TestTemplatedMirrorDropAndRename: with table: "{coll}", a mirror
// follows its collections: a rename moves the rows to the new name's
// table, a drop removes them (or marks them deleted), a collection made
// again after either starts afresh, and a replayed batch changes nothing.
func TestTemplatedMirrorDropAndRename(t *testing.T) {
	for _, soft := range []bool{false, true} {
		t.Run(fmt.Sprintf("soft_delete=%v", soft), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "{coll}", CreateTable: true, SoftDelete: soft})
			v := func(n int) bson.D { return bson.D{{Key: "v", Value: n}} }
			batches := [][]cdc.Record{{
				nsEvent(t, "db.x", cdc.OpInsert, 1, v(1), 10, 1, `1`),
				nsEvent(t, "db.x", cdc.OpInsert, 2, v(2), 10, 2, `2`),
				nsEvent(t, "db.never", cdc.OpDrop, nil, nil, 10, 3, `3`), // no table: nothing to do
				renameEvent(t, "db.nowhere", "db.elsewhere", 10, 4, `4`), // nor here
				nsEvent(t, "db.keep", cdc.OpInsert, 1, v(100), 10, 5, `5`),
			}, {
				renameEvent(t, "db.x", "db.y", 11, 1, `6`),
				nsEvent(t, "db.y", cdc.OpUpdate, 1, v(5), 12, 1, `7`),
				nsEvent(t, "db.x", cdc.OpInsert, 9, v(9), 13, 1, `8`), // x made again
			}, {
				nsEvent(t, "db.y", cdc.OpDrop, nil, nil, 14, 1, `9`),
				nsEvent(t, "db.y", cdc.OpInsert, 7, v(7), 15, 1, `10`), // y made again
				renameEvent(t, "db.keep", "db.k2", 16, 1, `11`),        // a chain of renames in one batch
				renameEvent(t, "db.k2", "db.k3", 16, 2, `12`),
			}}
			for i, b := range append(batches, batches[1], batches[2]) { // the last two again: a replay
				if err := writeBatch(t, s, cdc.Checkpoint{}, b...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			live := func(table string) string {
				if soft {
					return mirrorRowsWhere(t, c, table, "NOT _tide_deleted")
				}
				return mirrorRows(t, c, table)
			}
			for table, want := range map[string]string{"x": "9:9", "y": "7:7", "keep": "", "k2": "", "k3": "1:100"} {
				if got := live(table); got != want {
					t.Errorf("table %s holds %s, want %s", table, got, want)
				}
			}
			if soft {
				if n := queryInt(t, c, `SELECT count(*) FROM y WHERE _tide_deleted AND _tide_op = 'drop'`); n != 2 {
					t.Errorf("y has %d rows marked dropped, want the 2 moved there before the drop", n)
				}
			}
			if n := queryInt(t, c, `SELECT count(*) FROM pg_tables WHERE tablename IN ('never', 'nowhere', 'elsewhere')`); n != 0 {
				t.Errorf("%d tables made for collections that only had a drop or rename", n)
			}
		})
	}
}

// mirrorRowsWhere is mirrorRows of the rows matching cond.
func mirrorRowsWhere(t *testing.T, c *pgx.Conn, table, cond string) string {
	t.Helper()
	rows, err := c.Query(t.Context(), `SELECT (doc->>'_id') || ':' || (doc->>'v') FROM `+pgx.Identifier{table}.Sanitize()+` WHERE `+cond+` ORDER BY (doc->>'_id')::int`)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}
