package postgres_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// typedConfig is a typed mirror of table, flattened one level.
func typedConfig(dsn, table string) postgres.Config {
	cfg := postgres.DefaultConfig()
	cfg.DSN, cfg.Table = dsn, table
	return cfg
}

func dec(t testing.TB, s string) bson.Decimal128 {
	t.Helper()
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// columnTypes returns the type of each column of table.
func columnTypes(t testing.TB, c *pgx.Conn, table string) map[string]string {
	t.Helper()
	rows, err := c.Query(t.Context(), `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			t.Fatal(err)
		}
		out[n] = typ
	}
	return out
}

func queryText(t testing.TB, c *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var v any
	if err := c.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if v == nil {
		return "<NULL>"
	}
	return fmt.Sprint(v)
}

// TestTypedTypes writes one document holding every BSON type, and the
// edges of each, and checks the column each makes, what the column
// holds, and that the row reads back as the document.
func TestTypedTypes(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openKeepingSink(t, func() postgres.Config {
		cfg := typedConfig(dsn, "orders")
		cfg.Pipeline = "types"
		return cfg
	}())
	oid := bson.NewObjectID()
	uuid := bson.Binary{Subtype: bson.TypeBinaryUUID, Data: []byte("0123456789abcdef")}
	long := strings.Repeat("l", 100)
	doc := bson.D{
		{Key: "s", Value: "héllo"},
		{Key: "empty", Value: ""},
		{Key: "nul", Value: "a\x00b"},
		{Key: "i32", Value: int32(-7)},
		{Key: "i64", Value: int64(1) << 60},
		{Key: "d", Value: 1.5},
		{Key: "nan", Value: math.NaN()},
		{Key: "pinf", Value: math.Inf(1)},
		{Key: "ninf", Value: math.Inf(-1)},
		{Key: "negz", Value: math.Copysign(0, -1)},
		{Key: "dec", Value: dec(t, "1.50")},
		{Key: "decmax", Value: dec(t, "9.999999999999999999999999999999999E+6144")},
		{Key: "decmin", Value: dec(t, "-1E-6176")},
		{Key: "decnan", Value: dec(t, "NaN")},
		{Key: "decinf", Value: dec(t, "-Infinity")},
		{Key: "decnegz", Value: dec(t, "-0")},
		{Key: "b", Value: true},
		{Key: "date", Value: bson.NewDateTimeFromTime(time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC))},
		{Key: "old", Value: bson.NewDateTimeFromTime(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC))},
		{Key: "pre1970", Value: bson.NewDateTimeFromTime(time.Date(1900, 6, 1, 0, 0, 0, 0, time.UTC))},
		{Key: "far", Value: bson.NewDateTimeFromTime(time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC))},
		{Key: "toofar", Value: bson.DateTime(math.MaxInt64)},
		{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 5}},
		{Key: "oid", Value: oid},
		{Key: "uuid", Value: uuid},
		{Key: "bin", Value: bson.Binary{Data: []byte{0, 1, 2}}},
		{Key: "md5", Value: bson.Binary{Subtype: 5, Data: []byte("0123456789abcdef")}},
		{Key: "arr", Value: bson.A{int32(1), "x", bson.D{{Key: "y", Value: false}}}},
		{Key: "addr", Value: bson.D{{Key: "city", Value: "Lyon"}, {Key: "zip", Value: int32(69001)}, {Key: "geo", Value: bson.D{{Key: "lat", Value: 45.7}}}}},
		{Key: "emptyobj", Value: bson.D{}},
		{Key: "null", Value: nil},
		{Key: "re", Value: bson.Regex{Pattern: "^a", Options: "i"}},
		{Key: "a.b", Value: int32(1)},
		{Key: "x__y", Value: int32(1)},
		{Key: "x", Value: bson.D{{Key: "y", Value: int32(2)}}},
		{Key: long, Value: int32(3)},
		{Key: "_tide_op", Value: "mine"},
		{Key: "deepnul", Value: bson.A{"ok", "n\x00ul"}},
		{Key: "badutf8", Value: "a\xffb"},
		{Key: "bad\xfekey", Value: int32(9)},
	}
	if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":1}`)}, event(t, cdc.OpInsert, int64(1), doc, 10, 1, "1")); err != nil {
		t.Fatalf("write: %v", err)
	}

	types := columnTypes(t, c, "orders")
	for col, want := range map[string]string{
		"_id": "bigint", "s": "text", "empty": "text", "nul": "text", "i32": "integer", "i64": "bigint",
		"d": "double precision", "nan": "double precision", "negz": "double precision", "dec": "numeric",
		"decmax": "numeric", "decnegz": "numeric", "b": "boolean", "date": "timestamp with time zone",
		"far": "timestamp with time zone", "toofar": "timestamp with time zone", "ts": "timestamp with time zone",
		"oid": "text", "uuid": "uuid", "bin": "bytea", "md5": "jsonb", "arr": "jsonb",
		"addr__city": "text", "addr__zip": "integer", "addr__geo": "jsonb", "re": "jsonb", "a.b": "integer",
		"x__y": "integer", "_tide_overflow": "jsonb", "_tide_op": "text",
	} {
		if got := types[col]; got != want {
			t.Errorf("column %q is %q, want %q", col, got, want)
		}
	}
	for _, absent := range []string{"null", "emptyobj", "addr"} {
		if _, ok := types[absent]; ok {
			t.Errorf("column %q exists; a null, an empty object or a flattened object makes none", absent)
		}
	}
	// Renamed fields: x.y collides with x__y, a long name is cut, a
	// system column's name is taken; each is recorded.
	var renamed []string
	rows, err := c.Query(t.Context(), `SELECT column_name, array_to_string(path, '.') FROM tide_columns WHERE table_name = 'orders' AND note LIKE '%renamed%' ORDER BY 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var col, path string
		if err := rows.Scan(&col, &path); err != nil {
			t.Fatal(err)
		}
		if len(col) > 63 || types[col] == "" {
			t.Errorf("renamed column %q of %s: not a column of the table", col, path)
		}
		renamed = append(renamed, path)
	}
	if want := []string{"_tide_op", "bad\ufffdkey", long, "x.y"}; fmt.Sprint(renamed) != fmt.Sprint(want) {
		t.Errorf("renamed fields %q, want %q", renamed, want)
	}

	for sql, want := range map[string]string{
		`SELECT s FROM orders WHERE _id = 1`:                          "héllo",
		`SELECT empty FROM orders WHERE _id = 1`:                      "",
		`SELECT nul FROM orders WHERE _id = 1`:                        "<NULL>",
		`SELECT _tide_overflow->'nul' ? '$tideBSON' FROM orders`:      "true",
		`SELECT i64::text FROM orders WHERE _id = 1`:                  "1152921504606846976",
		`SELECT nan::text || pinf::text || ninf::text FROM orders`:    "NaNInfinity-Infinity",
		`SELECT negz::text FROM orders`:                               "-0",
		`SELECT dec::text FROM orders`:                                "1.50",
		`SELECT length(decmax::text) FROM orders`:                     "6145",
		`SELECT decmin = -1e-6176 FROM orders`:                        "true",
		`SELECT decnan::text || decinf::text FROM orders`:             "NaN-Infinity",
		`SELECT decnegz FROM orders`:                                  "<NULL>",
		`SELECT _tide_overflow->>'decnegz' FROM orders`:               `{"$numberDecimal": "-0"}`,
		`SELECT date = '2024-01-02T03:04:05.006Z' FROM orders`:        "true",
		`SELECT old = '1000-01-01T00:00:00Z' FROM orders`:             "true",
		`SELECT pre1970 = '1900-06-01T00:00:00Z' FROM orders`:         "true",
		`SELECT far = '20000-01-01T00:00:00Z' FROM orders`:            "true",
		`SELECT toofar FROM orders`:                                   "<NULL>",
		`SELECT ts = to_timestamp(1700000000) FROM orders`:            "true",
		`SELECT _tide_overflow->'ts'->'$timestamp'->>'i' FROM orders`: "5",
		`SELECT oid FROM orders`:                                      oid.Hex(),
		`SELECT uuid::text FROM orders`:                               "30313233-3435-3637-3839-616263646566",
		`SELECT encode(bin, 'hex') FROM orders`:                       "000102",
		`SELECT md5->'$binary'->>'subType' FROM orders`:               "05",
		`SELECT arr::text FROM orders`:                                `[1, "x", {"y": false}]`,
		`SELECT addr__city || addr__zip FROM orders`:                  "Lyon69001",
		`SELECT addr__geo->>'lat' FROM orders`:                        "45.7",
		`SELECT _tide_overflow->>'emptyobj' FROM orders`:              "{}",
		`SELECT jsonb_typeof(_tide_overflow->'null') FROM orders`:     "null",
		`SELECT "a.b" + x__y FROM orders`:                             "2",
		`SELECT _tide_op FROM orders`:                                 "insert",
		`SELECT deepnul FROM orders`:                                  "<NULL>",
		`SELECT badutf8 FROM orders`:                                  "<NULL>",
		`SELECT _tide_overflow->'badutf8' ? '$tideBSON' FROM orders`:  "true",
	} {
		if got := queryText(t, c, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	testenv.CompareTyped(t, c, "orders", map[string]bson.D{"1": doc})
}

// TestTypedKeys checks the _id column each kind of key makes, that a
// plain literal finds the row, and that a key of another type turns
// the column into jsonb without losing the rows it had.
func TestTypedKeys(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	oid := bson.NewObjectID()
	uuid := bson.Binary{Subtype: bson.TypeBinaryUUID, Data: []byte("0123456789abcdef")}
	for name, tc := range map[string]struct {
		id      any
		typ     string
		literal string
	}{
		"int32":    {int32(5), "bigint", `5`},
		"int64":    {int64(1) << 40, "bigint", `1099511627776`},
		"string":   {"abc", "text", `'abc'`},
		"objectid": {oid, "text", `'` + oid.Hex() + `'`},
		"uuid":     {uuid, "uuid", `'30313233-3435-3637-3839-616263646566'`},
		"double":   {2.5, "jsonb", `'2.5'`},
		"document": {bson.D{{Key: "a", Value: int32(1)}}, "jsonb", `'{"a": 1}'`},
	} {
		t.Run(name, func(t *testing.T) {
			table := "k_" + name
			cfg := typedConfig(dsn, table)
			s := openSink(t, cfg)
			rec := event(t, cdc.OpInsert, tc.id, bson.D{{Key: "v", Value: int32(1)}}, 10, 1, "1")
			if err := writeBatch(t, s, cdc.Checkpoint{}, rec); err != nil {
				t.Fatalf("write: %v", err)
			}
			if got := columnTypes(t, c, table)["_id"]; got != tc.typ {
				t.Errorf("_id is %s, want %s", got, tc.typ)
			}
			if n := queryInt(t, c, `SELECT count(*) FROM `+table+` WHERE _id = `+tc.literal); n != 1 {
				t.Errorf("rows with _id = %s: %d, want 1", tc.literal, n)
			}
		})
	}

	// Another type of key: the column becomes jsonb, in the batch's
	// transaction; the rows it had keep their keys, as JSON.
	s := openSink(t, typedConfig(dsn, "mixed"))
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(1), bson.D{{Key: "v", Value: "a"}}, 10, 1, "1")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := columnTypes(t, c, "mixed")["_id"]; got != "bigint" {
		t.Fatalf("_id is %s, want bigint", got)
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, oid, bson.D{{Key: "v", Value: "b"}}, 10, 2, "2"),
		event(t, cdc.OpInsert, "x", bson.D{{Key: "v", Value: "c"}}, 11, 1, "3"),
		event(t, cdc.OpUpdate, int64(1), bson.D{{Key: "v", Value: "a2"}}, 11, 2, "4")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := columnTypes(t, c, "mixed")["_id"]; got != "jsonb" {
		t.Errorf("_id after a key of another type is %s, want jsonb", got)
	}
	for lit, want := range map[string]string{`'1'`: "a2", `'"x"'`: "c", `'{"$oid": "` + oid.Hex() + `"}'`: "b"} {
		if got := queryText(t, c, `SELECT v FROM mixed WHERE _id = `+lit); got != want {
			t.Errorf("v of _id %s = %s, want %s", lit, got, want)
		}
	}
	if n := queryInt(t, c, `SELECT count(*) FROM mixed`); n != 3 {
		t.Errorf("rows = %d, want 3", n)
	}
}

// TestTypedDrift changes a field's type batch by batch: int → long →
// double → string, and checks the widenings, the overflow, the records
// in tide_columns and the drift metric; a removed field leaves NULL.
func TestTypedDrift(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openKeepingSink(t, func() postgres.Config {
		cfg := typedConfig(dsn, "orders")
		cfg.Pipeline = "drift"
		return cfg
	}())
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector("drift"))
	want := map[string]bson.D{}
	n := 0
	write := func(id int64, doc bson.D) {
		t.Helper()
		n++
		want[fmt.Sprint(id)] = append(bson.D{{Key: "_id", Value: id}}, doc...)
		rec := event(t, cdc.OpInsert, id, doc, 10, uint32(n), fmt.Sprint(n))
		if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"n":%d}`, n))}, rec); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
	}
	typeOf := func(col string) string { return columnTypes(t, c, "orders")[col] }

	write(1, bson.D{{Key: "v", Value: int32(1)}, {Key: "f", Value: 1.5}, {Key: "keep", Value: "k"}})
	if got := typeOf("v"); got != "integer" {
		t.Fatalf("v is %s, want integer", got)
	}
	write(2, bson.D{{Key: "v", Value: int64(1) << 40}})
	if got := typeOf("v"); got != "bigint" {
		t.Errorf("v after an int64 is %s, want bigint", got)
	}
	write(3, bson.D{{Key: "v", Value: 2.25}, {Key: "f", Value: int64(1) << 60}})
	if got := typeOf("v"); got != "numeric" {
		t.Errorf("v after a double is %s, want numeric", got)
	}
	write(4, bson.D{{Key: "v", Value: "text"}, {Key: "f", Value: "not a number"}})
	if got := typeOf("v"); got != "numeric" {
		t.Errorf("v after a string is %s, want numeric still", got)
	}
	if got := typeOf("f"); got != "double precision" {
		t.Errorf("f is %s, want double precision (an int64 past 2^53 and a string overflow)", got)
	}
	for sql, want := range map[string]string{
		`SELECT v::text FROM orders WHERE _id = 1`:              "1",
		`SELECT v::text FROM orders WHERE _id = 2`:              "1099511627776",
		`SELECT v::text FROM orders WHERE _id = 3`:              "2.25",
		`SELECT v FROM orders WHERE _id = 4`:                    "<NULL>",
		`SELECT _tide_overflow->>'v' FROM orders WHERE _id = 4`: "text",
		`SELECT _tide_overflow->>'f' FROM orders WHERE _id = 3`: "1152921504606846976",
		`SELECT keep FROM orders WHERE _id = 2`:                 "<NULL>",
		`SELECT string_agg(decision || ':' || bson_type || ':' || pg_type, ',' ORDER BY seen_at, decision, bson_type)
			FROM tide_columns WHERE table_name = 'orders' AND column_name = 'v'`: "added:int:integer,widened:long:bigint,widened:double:numeric,overflow:string:numeric",
	} {
		if got := queryText(t, c, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	if got := s.TypeDrift(); got[[2]string{"orders", "v"}] != 1 || got[[2]string{"orders", "f"}] != 2 {
		t.Errorf("drift = %v, want v 1 and f 2", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		if mf.GetName() != "tide_postgres_type_drift_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["table"] == "orders" && labels["column"] == "f" && labels["pipeline"] == "drift" && m.Counter.GetValue() == 2 {
				found++
			}
		}
	}
	if found != 1 {
		t.Errorf("tide_postgres_type_drift_total{table=orders,column=f} = 2 not found in %v", mfs)
	}
	testenv.CompareTyped(t, c, "orders", want)

	// An update with the whole document sets every column: a removed
	// field becomes NULL; a delete marks the row.
	n++
	upd := event(t, cdc.OpUpdate, int64(1), bson.D{{Key: "v", Value: int32(9)}}, 11, 1, fmt.Sprint(n))
	n++
	del := event(t, cdc.OpDelete, int64(2), nil, 11, 2, fmt.Sprint(n))
	if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(`{"n":99}`)}, upd, del); err != nil {
		t.Fatal(err)
	}
	want["1"] = bson.D{{Key: "_id", Value: int64(1)}, {Key: "v", Value: int32(9)}}
	delete(want, "2")
	testenv.CompareTyped(t, c, "orders", want)
	if got := queryText(t, c, `SELECT _tide_deleted::text FROM orders WHERE _id = 2`); got != "true" {
		t.Errorf("deleted row: _tide_deleted = %s", got)
	}
}

// TestTypedColumnCap writes a document with more fields than a table
// can have columns: the fields past PostgreSQL's 1,600 go to
// _tide_overflow, and the row still reads back whole.
func TestTypedColumnCap(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	s := openSink(t, typedConfig(dsn, "wide"))
	var doc bson.D
	for i := range 1700 {
		doc = append(doc, bson.E{Key: fmt.Sprintf("f%04d", i), Value: i%2 == 0})
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(1), doc, 10, 1, "1")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if n := len(columnTypes(t, c, "wide")); n != 1600 {
		t.Errorf("columns = %d, want 1600", n)
	}
	if got := queryText(t, c, `SELECT count(*)::text FROM wide, jsonb_object_keys(_tide_overflow)`); got != fmt.Sprint(1700-1594) {
		t.Errorf("fields in _tide_overflow = %s, want %d", got, 1700-1594)
	}
	// A second document with a new field: no column, to the overflow.
	doc2 := append(doc[:10:10], bson.E{Key: "late", Value: "x"})
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(2), doc2, 10, 2, "2")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := queryText(t, c, `SELECT _tide_overflow->>'late' FROM wide WHERE _id = 2`); got != "x" {
		t.Errorf("late field = %s, want x in _tide_overflow", got)
	}
	testenv.CompareTyped(t, c, "wide", map[string]bson.D{
		"1": append(bson.D{{Key: "_id", Value: int32(1)}}, doc...),
		"2": append(bson.D{{Key: "_id", Value: int32(2)}}, doc2...),
	})
}

// TestTypedPins pins column types: a value a pinned column cannot hold
// exactly goes to _tide_overflow, and a pinned column never widens.
func TestTypedPins(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "priced")
	cfg.ColumnTypes = map[string]string{"price": "numeric(12,2)", "created": "timestamptz", "n": "integer", "addr__zip": "text"}
	s := openSink(t, cfg)
	docs := map[string]bson.D{
		"1": {{Key: "_id", Value: int32(1)}, {Key: "price", Value: 12.5}, {Key: "created", Value: bson.DateTime(0)}, {Key: "n", Value: int64(7)}, {Key: "addr", Value: bson.D{{Key: "zip", Value: "69001"}}}},
		"2": {{Key: "_id", Value: int32(2)}, {Key: "price", Value: 1.234}, {Key: "created", Value: "yesterday"}, {Key: "n", Value: int64(1) << 40}, {Key: "addr", Value: bson.D{{Key: "zip", Value: int32(69001)}}}},
		"3": {{Key: "_id", Value: int32(3)}, {Key: "price", Value: dec(t, "9999999999.99")}, {Key: "n", Value: 2.5}},
		"4": {{Key: "_id", Value: int32(4)}, {Key: "price", Value: dec(t, "99999999999")}},
	}
	var recs []cdc.Record
	for i, id := range []string{"1", "2", "3", "4"} {
		d := docs[id]
		recs = append(recs, event(t, cdc.OpInsert, d[0].Value, d[1:], 10, uint32(i+1), id))
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, recs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	types := columnTypes(t, c, "priced")
	for col, want := range map[string]string{"price": "numeric(12,2)", "created": "timestamp with time zone", "n": "integer", "addr__zip": "text"} {
		if types[col] != want {
			t.Errorf("%s is %s, want %s (pinned)", col, types[col], want)
		}
	}
	for sql, want := range map[string]string{
		`SELECT price::text FROM priced WHERE _id = 1`:                    "12.50",
		`SELECT price FROM priced WHERE _id = 2`:                          "<NULL>",
		`SELECT _tide_overflow->>'price' FROM priced WHERE _id = 2`:       "1.234",
		`SELECT price::text FROM priced WHERE _id = 3`:                    "9999999999.99",
		`SELECT _tide_overflow->>'price' FROM priced WHERE _id = 4`:       `{"$numberDecimal": "99999999999"}`,
		`SELECT _tide_overflow->>'created' FROM priced WHERE _id = 2`:     "yesterday",
		`SELECT n::text FROM priced WHERE _id = 1`:                        "7",
		`SELECT _tide_overflow->>'n' FROM priced WHERE _id = 2`:           "1099511627776",
		`SELECT _tide_overflow->'addr'->>'zip' FROM priced WHERE _id = 2`: "69001",
		`SELECT addr__zip FROM priced WHERE _id = 1`:                      "69001",
	} {
		if got := queryText(t, c, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	testenv.CompareTyped(t, c, "priced", docs)
}

// TestTypedConfig checks the refusals of the new keys.
func TestTypedConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  postgres.Config
		want string
	}{
		"unknown layout":     {postgres.Config{DSN: "x", Columns: "flat"}, `columns: "flat" is not one of auto, document`},
		"negative depth":     {postgres.Config{DSN: "x", FlattenDepth: -1}, "flatten_depth: -1 is not between 0 and 100"},
		"unknown pin":        {postgres.Config{DSN: "x", ColumnTypes: map[string]string{"a": "money"}}, `column_types.a: "money" is not a type`},
		"bad numeric pin":    {postgres.Config{DSN: "x", ColumnTypes: map[string]string{"a": "numeric(2,5)"}}, "column_types.a:"},
		"pins with document": {postgres.Config{DSN: "x", Columns: "document", ColumnTypes: map[string]string{"a": "text"}}, "column_types: pins typed columns, which columns: document has not"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
	ok := postgres.Config{DSN: "x", ColumnTypes: map[string]string{"a": "Numeric(12, 2)", "b": "TIMESTAMPTZ", "c": "double precision"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate = %v, want nil", err)
	}
}

// typedLive lists "_id:v" of the rows of a typed table matching cond.
func typedLive(t *testing.T, c *pgx.Conn, table, cond string) string {
	t.Helper()
	var s *string
	err := c.QueryRow(t.Context(), `SELECT string_agg(_id::text || ':' || coalesce(v::text, _tide_overflow->>'v', '-'), ' ' ORDER BY _id) FROM `+
		pgx.Identifier{table}.Sanitize()+` WHERE `+cond).Scan(&s)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// TestTypedDropAndRename: typed tables follow their collections as
// document ones do: a rename moves the typed rows, column by field path,
// into the new name's table (made like the old one, or given the columns
// it lacks, and widened where the old one's are wider), a drop removes or
// marks them, and a replayed batch changes nothing.
func TestTypedDropAndRename(t *testing.T) {
	for _, soft := range []bool{false, true} {
		t.Run(fmt.Sprintf("soft_delete=%v", soft), func(t *testing.T) {
			dsn := testenv.Postgres(t)
			c := connect(t, dsn)
			cfg := typedConfig(dsn, "{coll}")
			cfg.SoftDelete = soft
			s := openSink(t, cfg)
			v := func(n int32) bson.D {
				return bson.D{{Key: "v", Value: n}, {Key: "a", Value: bson.D{{Key: "b", Value: "x"}}}}
			}
			otherDoc := bson.D{{Key: "v", Value: "text v"}, {Key: "w", Value: bson.DateTime(-86400000)}, {Key: "a", Value: bson.D{{Key: "b", Value: 2.5}}},
				{Key: "z", Value: bson.Binary{Data: []byte("\x00\xff")}}}
			batches := [][]cdc.Record{{
				nsEvent(t, "db.x", cdc.OpInsert, int32(1), v(1), 10, 1, `1`),
				nsEvent(t, "db.x", cdc.OpInsert, int32(2), v(2), 10, 2, `2`),
				nsEvent(t, "db.keep", cdc.OpInsert, int32(1), v(100), 10, 5, `5`),
				nsEvent(t, "db.big", cdc.OpInsert, int32(50), bson.D{{Key: "v", Value: int64(1) << 40}, {Key: "w", Value: "only here"}}, 10, 6, `6`),
				nsEvent(t, "db.small", cdc.OpInsert, int32(60), bson.D{{Key: "v", Value: int32(6)}, {Key: "z", Value: true}}, 10, 7, `7`),
				nsEvent(t, "db.other", cdc.OpInsert, "s1", otherDoc, 10, 8, `7a`),
			}, {
				renameEvent(t, "db.x", "db.y", 11, 1, `8`),
				nsEvent(t, "db.y", cdc.OpUpdate, int32(1), v(5), 12, 1, `9`),
				nsEvent(t, "db.x", cdc.OpInsert, int32(9), v(9), 13, 1, `10`), // x made again
				renameEvent(t, "db.big", "db.small", 13, 2, `11`),             // into an existing table with other columns
				renameEvent(t, "db.other", "db.small", 13, 3, `11a`),          // and other types of columns and keys
			}, {
				nsEvent(t, "db.y", cdc.OpDrop, nil, nil, 14, 1, `12`),
				nsEvent(t, "db.y", cdc.OpInsert, int32(7), v(7), 15, 1, `13`), // y made again
				renameEvent(t, "db.keep", "db.k2", 16, 1, `14`),               // a chain of renames in one batch
				renameEvent(t, "db.k2", "db.k3", 16, 2, `15`),
			}}
			for i, b := range append(batches, batches[1], batches[2]) { // the last two again: a replay
				if err := writeBatch(t, s, cdc.Checkpoint{}, b...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			cond := "true"
			if soft {
				cond = "NOT _tide_deleted"
			}
			for table, want := range map[string]string{"x": "9:9", "y": "7:7", "keep": "", "k2": "", "k3": "1:100",
				"small": `"s1":text v 50:1099511627776 60:6`, "big": "", "other": ""} {
				if got := typedLive(t, c, table, cond); got != want {
					t.Errorf("table %s holds %s, want %s", table, got, want)
				}
			}
			if got := columnTypes(t, c, "small")["v"]; got != "bigint" {
				t.Errorf("small.v is %s, want bigint: widened to take big's rows", got)
			}
			if got := queryText(t, c, `SELECT w || coalesce(z::text, 'null') FROM small WHERE _id = '50'`); got != "only herenull" {
				t.Errorf("moved row: w, z = %s, want its own w and no z", got)
			}
			if got := queryText(t, c, `SELECT a__b FROM k3 WHERE _id = 1`); got != "x" {
				t.Errorf("k3.a__b = %s, want x", got)
			}
			if got := columnTypes(t, c, "small")["_id"]; got != "jsonb" {
				t.Errorf("small._id is %s, want jsonb: it took the string keys of other", got)
			}
			if !soft {
				testenv.CompareTyped(t, c, "small", map[string]bson.D{
					`"s1"`: append(bson.D{{Key: "_id", Value: "s1"}}, otherDoc...),
					"50":   {{Key: "_id", Value: int32(50)}, {Key: "v", Value: int64(1) << 40}, {Key: "w", Value: "only here"}},
					"60":   {{Key: "_id", Value: int32(60)}, {Key: "v", Value: int32(6)}, {Key: "z", Value: true}},
				})
			}
			if soft {
				if n := queryInt(t, c, `SELECT count(*) FROM y WHERE _tide_deleted AND _tide_op = 'drop'`); n != 2 {
					t.Errorf("y has %d rows marked dropped, want the 2 moved there before the drop", n)
				}
			}
		})
	}
}

// TestDocumentPlainKey: a new table of the document layout has _key, the
// plain form of its key, indexed, so that a plain literal finds a row.
func TestDocumentPlainKey(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "docs")
	cfg.Columns = postgres.ColumnsDocument
	s := openSink(t, cfg)
	oid := bson.NewObjectID()
	ids := map[string]any{"42": int32(42), "1099511627776": int64(1) << 40, "abc": "abc", oid.Hex(): oid, "2.5": 2.5,
		`{"_id":{"a":{"$numberInt":"1"}}}`: bson.D{{Key: "a", Value: int32(1)}}}
	var recs []cdc.Record
	n := 0
	for _, id := range ids {
		n++
		recs = append(recs, event(t, cdc.OpInsert, id, bson.D{{Key: "v", Value: int32(n)}}, 10, uint32(n), fmt.Sprint(n)))
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, recs...); err != nil {
		t.Fatal(err)
	}
	for key := range ids {
		if n := queryInt(t, c, `SELECT count(*) FROM docs WHERE _key = $1`, key); n != 1 {
			t.Errorf("rows with _key %s: %d, want 1", key, n)
		}
	}
	if n := queryInt(t, c, `SELECT count(*) FROM pg_indexes WHERE tablename = 'docs' AND indexdef LIKE '%(_key)%'`); n != 1 {
		t.Errorf("indexes on _key: %d, want 1", n)
	}
}

// TestTypedLayout checks what tide validate shows of each table: a
// missing one, a typed one with its fields and the types seen, a
// document one.
func TestTypedLayout(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "orders")
	text, err := cfg.Layout(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := `table "public"."orders": does not exist; made on its first row with typed columns (columns: auto, flatten_depth 1)`; !strings.Contains(text, want) {
		t.Errorf("layout of a missing table:\n%s\nwant %q", text, want)
	}
	s := openSink(t, cfg)
	for i, v := range []any{int32(1), 2.5, "x", dec(t, "1.5"), dec(t, "2")} {
		rec := event(t, cdc.OpInsert, int32(i), bson.D{{Key: "v", Value: v}, {Key: "a", Value: bson.D{{Key: "b", Value: true}}}}, 10, uint32(i+1), fmt.Sprint(i))
		if err := writeBatch(t, s, cdc.Checkpoint{}, rec); err != nil {
			t.Fatal(err)
		}
	}
	if text, err = cfg.Layout(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`table "public"."orders": exists with typed columns`, "v ", "numeric", "int, double widened, string overflow, decimal seen", "a__b", "a.b", "boolean", "_tide_overflow"} {
		if !strings.Contains(text, want) {
			t.Errorf("layout lacks %q:\n%s", want, text)
		}
	}
	if _, err := c.Exec(t.Context(), `CREATE TABLE docs (_id text PRIMARY KEY, doc jsonb)`); err != nil {
		t.Fatal(err)
	}
	cfg.Table = "docs"
	if text, err = cfg.Layout(t.Context()); err != nil || !strings.Contains(text, "exists with the document layout") {
		t.Errorf("layout of a document table: %v\n%s", err, text)
	}
	cfg.DSN = "postgres://tide@127.0.0.1:1/none?connect_timeout=2"
	if _, err := cfg.Layout(t.Context()); err == nil {
		t.Error("layout with an unreachable server: no error")
	}
}

// TestTypedAppend: an append table gets the envelope's columns and the
// document's typed columns, its _id among them; drift follows the same
// rules; an event without a document (a delete) leaves them NULL.
func TestTypedAppend(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "log")
	cfg.Mode = postgres.ModeAppend
	cfg.Pipeline = "app"
	s := openKeepingSink(t, cfg)
	batches := [][]cdc.Record{{
		event(t, cdc.OpInsert, int32(1), bson.D{{Key: "v", Value: int32(1)}, {Key: "a", Value: bson.D{{Key: "b", Value: "x"}}}}, 10, 1, "1"),
		event(t, cdc.OpUpdate, int32(1), bson.D{{Key: "v", Value: int64(1) << 40}}, 10, 2, "2"),
	}, {
		event(t, cdc.OpReplace, int32(1), bson.D{{Key: "v", Value: "text"}, {Key: "w", Value: 2.5}}, 11, 1, "3"),
		event(t, cdc.OpDelete, int32(1), nil, 11, 2, "4"),
	}}
	for i, b := range batches {
		if err := writeBatch(t, s, cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"n":%d}`, i))}, b...); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	types := columnTypes(t, c, "log")
	for col, want := range map[string]string{"id": "bigint", "_op": "text", "_full_document": "jsonb", "_id": "integer", "v": "bigint",
		"a__b": "text", "w": "double precision", "_tide_overflow": "jsonb"} {
		if types[col] != want {
			t.Errorf("column %s is %q, want %q", col, types[col], want)
		}
	}
	if got := queryText(t, c, `SELECT string_agg(_op || ':' || coalesce(_id::text, '-') || ':' || coalesce(v::text, _tide_overflow->>'v', '-') || ':' || coalesce(a__b, '-'), ' ' ORDER BY id) FROM log`); got != "insert:1:1:x update:1:1099511627776:- replace:1:text:- delete:-:-:-" {
		t.Errorf("rows: %s", got)
	}
	if got := s.TypeDrift()[[2]string{"log", "v"}]; got != 1 {
		t.Errorf("drift of v = %d, want 1", got)
	}
	if got := queryText(t, c, `SELECT checkpoint->'source'->>'n' FROM tide_checkpoints WHERE pipeline = 'app'`); got != "1" {
		t.Errorf("checkpoint n = %s, want 1", got)
	}
}

// TestMalformedDocument: a full document that is not BSON is refused by
// Put, in either layout, at once.
func TestMalformedDocument(t *testing.T) {
	dsn := testenv.Postgres(t)
	for _, columns := range []string{postgres.ColumnsAuto, postgres.ColumnsDocument} {
		cfg := typedConfig(dsn, "bad_"+columns)
		cfg.Columns = columns
		s := openSink(t, cfg)
		rec := event(t, cdc.OpInsert, int32(1), bson.D{{Key: "v", Value: "x"}}, 10, 1, "1")
		rec.FullDocument = rec.FullDocument[:len(rec.FullDocument)-3]
		err := s.Put(t.Context(), []cdc.Record{rec})
		if err == nil || !strings.Contains(err.Error(), "full document") {
			t.Errorf("%s: Put of a truncated document: %v, want an error about the full document", columns, err)
		}
	}
}

// TestTypedReopen: a sink that finds a typed table (a restart) reads its
// layout back from the catalog and tide_columns: an ObjectId column stays
// one (a string in it is drift), a timestamp column keeps its kind, a
// pinned column its limits, a renamed field its column.
func TestTypedReopen(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	cfg := typedConfig(dsn, "orders")
	cfg.ColumnTypes = map[string]string{"price": "numeric(6,2)"}
	oid := bson.NewObjectID()
	first := bson.D{{Key: "ref", Value: oid}, {Key: "ts", Value: bson.Timestamp{T: 5, I: 6}}, {Key: "price", Value: 1.5},
		{Key: "x__y", Value: int32(1)}, {Key: "x", Value: bson.D{{Key: "y", Value: int32(2)}}}}
	s := postgres.New(func() postgres.Config { c := cfg; c.Logger = testLogger(t); return c }())
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(1), first, 10, 1, "1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSink(t, cfg)
	second := bson.D{{Key: "ref", Value: oid.Hex()}, {Key: "ts", Value: bson.Timestamp{T: 7, I: 8}}, {Key: "price", Value: 12345.5},
		{Key: "x__y", Value: int32(3)}, {Key: "x", Value: bson.D{{Key: "y", Value: int32(4)}}}}
	if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(2), second, 11, 1, "2")); err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]string{
		`SELECT ref FROM orders WHERE _id = 2`:                                                                      "<NULL>",
		`SELECT _tide_overflow->>'ref' FROM orders WHERE _id = 2`:                                                   oid.Hex(),
		`SELECT price FROM orders WHERE _id = 2`:                                                                    "<NULL>",
		`SELECT count(*) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attnum > 0 AND NOT attisdropped`: "11",
	} {
		if got := queryText(t, c, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	testenv.CompareTyped(t, c, "orders", map[string]bson.D{
		"1": append(bson.D{{Key: "_id", Value: int32(1)}}, first...),
		"2": append(bson.D{{Key: "_id", Value: int32(2)}}, second...),
	})
}

// TestExistingLayoutKept: an existing table keeps its layout whatever
// columns says: a document table stays one under columns: auto, a typed
// one stays typed under columns: document.
func TestExistingLayoutKept(t *testing.T) {
	dsn := testenv.Postgres(t)
	c := connect(t, dsn)
	doc := typedConfig(dsn, "docs")
	doc.Columns = postgres.ColumnsDocument
	typed := typedConfig(dsn, "typed")
	for _, cfg := range []postgres.Config{doc, typed} {
		s := postgres.New(func() postgres.Config { cfg.Logger = testLogger(t); return cfg }())
		if err := s.Open(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(1), bson.D{{Key: "v", Value: "one"}}, 10, 1, "1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	doc.Columns, typed.Columns = postgres.ColumnsAuto, postgres.ColumnsDocument
	for _, cfg := range []postgres.Config{doc, typed} {
		s := openSink(t, cfg)
		if err := writeBatch(t, s, cdc.Checkpoint{}, event(t, cdc.OpInsert, int32(2), bson.D{{Key: "v", Value: "two"}}, 11, 1, "2")); err != nil {
			t.Fatalf("%s: %v", cfg.Table, err)
		}
	}
	if got := queryText(t, c, `SELECT string_agg(doc->>'v', ',' ORDER BY _id) FROM docs`); got != "one,two" {
		t.Errorf("document table: %s, want one,two in doc", got)
	}
	if got := queryText(t, c, `SELECT string_agg(v, ',' ORDER BY _id) FROM typed`); got != "one,two" {
		t.Errorf("typed table: %s, want one,two in v", got)
	}
	if _, ok := columnTypes(t, c, "docs")["v"]; ok {
		t.Error("the document table got a typed column")
	}
}
