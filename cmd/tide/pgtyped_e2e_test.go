package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/testenv"
)

// shapeDoc is a document whose shape drifts from write to write, the same
// for the same id and v: n changes type (int, long, double, string, null,
// absent), addr nests, un-nests and nests deeper, fields appear (one of
// forty f* fields, dates before 1970, decimals, binary) and disappear.
func shapeDoc(id, v int64) bson.D {
	r := rand.New(rand.NewPCG(uint64(id), uint64(v)))
	d := bson.D{{Key: "_id", Value: id}, {Key: "v", Value: v}}
	switch r.IntN(6) {
	case 0:
		d = append(d, bson.E{Key: "n", Value: int32(v % 1000)})
	case 1:
		d = append(d, bson.E{Key: "n", Value: v << 33})
	case 2:
		d = append(d, bson.E{Key: "n", Value: float64(v) + 0.25})
	case 3:
		d = append(d, bson.E{Key: "n", Value: fmt.Sprint("n", v)})
	case 4:
		d = append(d, bson.E{Key: "n", Value: nil})
	}
	switch r.IntN(4) {
	case 0:
		d = append(d, bson.E{Key: "addr", Value: bson.D{{Key: "city", Value: fmt.Sprint("c", v%10)}, {Key: "zip", Value: int32(v % 99999)}}})
	case 1:
		d = append(d, bson.E{Key: "addr", Value: fmt.Sprint("flat ", v)})
	case 2:
		d = append(d, bson.E{Key: "addr", Value: bson.D{{Key: "city", Value: "deep"}, {Key: "geo", Value: bson.D{{Key: "lat", Value: 45.5}, {Key: "lng", Value: float64(v) / 8}}}}})
	}
	if r.IntN(3) == 0 {
		d = append(d, bson.E{Key: "meta", Value: bson.D{{Key: "tags", Value: bson.A{"a", v % 7}}, {Key: "ok", Value: v%2 == 0}}})
	}
	d = append(d, bson.E{Key: fmt.Sprintf("f%d", v%40), Value: v%3 == 0})
	if r.IntN(5) == 0 {
		d = append(d, bson.E{Key: "when", Value: bson.NewDateTimeFromTime(time.Date(1900+int(v%300), 1, 2, 3, 4, 5, 0, time.UTC))})
	}
	if r.IntN(7) == 0 {
		p, _ := bson.ParseDecimal128(fmt.Sprintf("%d.%02d", v, v%100))
		d = append(d, bson.E{Key: "price", Value: p})
	}
	if r.IntN(10) == 0 {
		d = append(d, bson.E{Key: "bin", Value: bson.Binary{Data: []byte{byte(v), 0, byte(id)}}})
	}
	return d
}

// TestTypedPostgresSIGKILL is issue 28's end-to-end test: a database of
// collections whose documents change shape as they go (shapeDoc), with a
// rename and a drop on the way, mirrored into typed tables
// (columns: auto) with the checkpoint in the sink, while `tide run` is
// SIGKILLed seven times. At the end each table, read back by its
// recorded column types plus _tide_overflow, equals its collection,
// value for value, and a row is found by its key as a plain literal.
func TestTypedPostgresSIGKILL(t *testing.T) {
	t.Parallel()
	const ops, kills = 2100, 7
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	dsn := testenv.Postgres(t)
	srv := testenv.MongoWire(t)
	w := newShopWorkload(t, srv.URI(), seed, ops)
	w.makeDoc = shapeDoc
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: pg-typed
source:
  mongo:
    uri: %q
    database: shop
    collections: ["*"]
    exclude: ["tmp_*"]
    full_document: update_lookup
    max_await: 100ms
sink:
  postgres: {dsn: "${PG_DSN}", table: "{coll}", mode: mirror, columns: auto, flatten_depth: 1, soft_delete: false}
checkpoint: sink
batch: {max_records: 50, commit_interval: 10ms}
`, srv.URI()))
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tg := pgTarget(t, conn, "pg-typed", dir, cfg, dsn)
	killLoop(t, rng, w, kills, []e2eTarget{tg})

	last := tg.start()
	waitFor(t, 2*time.Minute, "the last change in PostgreSQL", func() bool {
		var n int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM orders WHERE v = $1`, ops).Scan(&n)
		return err == nil && n == 1
	}, last)
	last.stop()

	for _, c := range []string{"orders", "customers_v2", "returns"} {
		cur, err := w.db.Collection(c).Find(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bson.Raw{}
		for cur.Next(t.Context()) {
			id, _ := cur.Current.Lookup("_id").AsInt64OK()
			want[fmt.Sprint(id)] = append(bson.Raw(nil), cur.Current...)
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		cur.Close(context.Background())
		testenv.CompareTyped(t, conn, c, want)
		for key := range want { // any one: by its key, a plain literal
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{c}.Sanitize()+` WHERE _id = `+key).Scan(&n); err != nil || n != 1 {
				t.Errorf("table %s: rows with _id = %s: %d, %v; want 1", c, key, n, err)
			}
			break
		}
	}
	for _, c := range []string{"customers", "items"} {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+c).Scan(&n); err != nil || n != 0 {
			t.Errorf("table %s of a renamed or dropped collection: %d rows (%v), want none", c, n, err)
		}
	}
	var types string
	if err := conn.QueryRow(t.Context(), `SELECT string_agg(DISTINCT pg_type, ',' ORDER BY pg_type) FROM tide_columns WHERE table_name = 'orders' AND column_name = 'n'`).Scan(&types); err != nil {
		t.Fatal(err)
	}
	t.Logf("orders.n went through %s", types)

	// tide validate shows the layout of the tables that exist.
	cmd := tideCmd(t, dir, "validate", "-f", cfg)
	cmd.Env = append(cmd.Env, "PG_DSN="+dsn)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tide validate: %v\n%s", err, out)
	}
	for _, want := range []string{`is valid`, `table "public"."orders": exists with typed columns`, `addr__city`, `addr.city`, `_tide_overflow`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tide validate does not show %q:\n%s", want, out)
		}
	}
}
