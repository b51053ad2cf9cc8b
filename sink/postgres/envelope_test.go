package postgres_test

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// appendExtract is how append mode made its columns before it COPYed
// them straight into the table: the server extracted them from the
// envelope as jsonb. The rows must be the same.
const appendExtract = `SELECT rec->>'_namespace', rec->>'_op', nullif(rec->'_document_key', 'null'),
	(rec->>'_cluster_time_s')::bigint, (rec->>'_cluster_time_i')::bigint, (rec->>'_wall_time_ms')::bigint,
	nullif(rec->'_full_document', 'null'), nullif(rec->'_before', 'null'), nullif(rec->'_update_desc', 'null'),
	nullif(rec->'_extra', 'null'), nullif(rec->'_headers', 'null'), nullif(rec->'_resume_token', 'null')
	FROM envelopes ORDER BY n`

const appendColumns = `_namespace, _op, _document_key, _cluster_time_s, _cluster_time_i, _wall_time_ms,
	_full_document, _before, _update_desc, _extra, _headers, _resume_token`

// TestAppendColumnsMatchEnvelope writes varied events in append mode, in
// both envelope formats, and compares each row with what PostgreSQL
// extracts from the same envelope.
func TestAppendColumnsMatchEnvelope(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	tok, _ := bson.Marshal(bson.D{{Key: "_data", Value: "82651A2B3C000000012B0429"}})
	upd, _ := bson.Marshal(bson.D{{Key: "updatedFields", Value: bson.D{{Key: "a.b", Value: 1.5}}}, {Key: "removedFields", Value: bson.A{"x"}}})
	extra, _ := bson.Marshal(bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c"}}}})
	before, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}, {Key: "s", Value: "old"}})
	full, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}, {Key: "s", Value: "tab\t\"quote\" é \u2028 \\ end"}, {Key: "n", Value: int64(1) << 60},
		{Key: "f", Value: 1e300}, {Key: "d", Value: bson.NewDateTimeFromTime(time.UnixMilli(1700000000123))}, {Key: "e", Value: bson.D{}}, {Key: "a", Value: bson.A{}}})
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: 7}})
	evs := []cdc.Event{
		{Op: cdc.OpInsert, Namespace: "db.orders", ClusterTime: cdc.Timestamp{T: 1700000000, I: 3}, WallTimeMS: 1700000000123,
			DocumentKey: key, FullDocument: full, ResumeToken: tok, Pos: cdc.Position(`{"n":1}`)},
		{Op: cdc.OpUpdate, Namespace: `d"b.co\ll é\`, ClusterTime: cdc.Timestamp{T: 1, I: 4294967295},
			DocumentKey: key, FullDocument: full, PreImage: before, UpdateDesc: upd, Pos: cdc.Position(`{"n":2}`)},
		{Op: cdc.OpDelete, Namespace: "db.orders", DocumentKey: key, PreImage: before, Pos: cdc.Position(`{"n":3}`)},
		{Op: cdc.OpRename, Namespace: "db.orders", Extra: extra, Pos: cdc.Position(`{"n":4}`)},
		{Op: cdc.Op("message"), Namespace: "orders.new", Headers: map[string][]string{"k": {"v1", "v2"}}, Payload: []byte("hello"),
			PayloadFormat: cdc.PayloadString, Pos: cdc.Position(`{"n":5}`)},
		{Op: cdc.OpDropDatabase, Namespace: "db", Pos: cdc.Position(`{"n":6}`)},
	}
	for name, enc := range map[string]func([]byte, *cdc.Event) ([]byte, error){"json": encode.Envelope, "canonical": encode.CanonicalEnvelope} {
		t.Run(name, func(t *testing.T) {
			table := "log_" + name
			s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: table, Mode: postgres.ModeAppend, CreateTable: true})
			for _, q := range []string{`DROP TABLE IF EXISTS envelopes`, `CREATE TABLE envelopes (n int, rec jsonb)`} {
				if _, err := c.Exec(t.Context(), q); err != nil {
					t.Fatal(err)
				}
			}
			var recs []cdc.Record
			for i := range evs {
				data, err := enc(nil, &evs[i])
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, cdc.Record{Event: evs[i], Data: data})
				if _, err := c.Exec(t.Context(), `INSERT INTO envelopes VALUES ($1, $2)`, i, string(data)); err != nil {
					t.Fatalf("envelope %s: %v", data, err)
				}
			}
			if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":6}`)}, recs...); err != nil {
				t.Fatal(err)
			}
			if n := queryInt(t, c, `SELECT count(*) FROM `+table); n != int64(len(evs)) {
				t.Fatalf("rows = %d, want %d", n, len(evs))
			}
			// Row by row, in order: id order is event order.
			if n := queryInt(t, c, `SELECT count(*) FROM (
				(SELECT row_number() OVER (ORDER BY id) AS n, `+appendColumns+` FROM `+table+`)
				EXCEPT ALL
				(SELECT row_number() OVER () AS n, x.* FROM (`+appendExtract+`) AS x)) AS d`); n != 0 {
				var rows []string
				r, err := c.Query(t.Context(), `SELECT to_jsonb(t) - 'id' - '_tide_synced_at' FROM `+table+` t ORDER BY id`)
				if err == nil {
					for r.Next() {
						var s string
						_ = r.Scan(&s)
						rows = append(rows, s)
					}
					r.Close()
				}
				t.Errorf("%d rows differ from the server's extraction of their envelopes; rows:\n%s", n, strings.Join(rows, "\n"))
			}
		})
	}
}

// TestAppendRefusesANonEnvelope: a record that is not a JSON object (a
// format append mode cannot read) fails the batch, naming the record.
func TestAppendRefusesANonEnvelope(t *testing.T) {
	dsn := testenv.Postgres(t)
	s := openSink(t, postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "log", Mode: postgres.ModeAppend, CreateTable: true})
	for name, data := range map[string]string{
		"not an object":    `["a"]`,
		"cut short":        `{"_op":"insert","_namespace":"db.c`,
		"bad cluster time": `{"_op":"insert","_cluster_time_s":1.5}`,
	} {
		t.Run(name, func(t *testing.T) {
			rec := cdc.Record{Event: cdc.Event{Op: cdc.OpInsert, Pos: cdc.Position(`{"n":9}`)}, Data: []byte(data)}
			err := s.Put(t.Context(), []cdc.Record{rec})
			if err == nil {
				t.Fatal("Put accepted it")
			}
			for _, w := range []string{"postgres append", `position {"n":9}`, "envelope"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
