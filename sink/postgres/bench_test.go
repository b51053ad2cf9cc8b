package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// BenchmarkMirror measures generate → postgres mirror (the whole pipeline,
// the exactly-once transaction included) against two baselines writing
// the same rows into a table with the same primary key: one plain pgx
// CopyFrom, and pipelined batches of INSERT ... ON CONFLICT statements.
// The three are interleaved, rounds times, and the medians reported, so
// that a loaded machine slows them alike.
//
// TIDE_PG_BENCH_EVENTS sets the events per measurement (default 200000),
// TIDE_PG_BENCH_BATCHES the pipeline batch sizes (default 1000,5000,20000).
// Documents are 200 bytes of BSON. Run with -benchtime=1x; each b.N
// iteration is one round.
func BenchmarkMirror(b *testing.B) {
	events := envInt("TIDE_PG_BENCH_EVENTS", 200_000)
	var batches []int
	for _, f := range strings.Split(envString("TIDE_PG_BENCH_BATCHES", "1000,5000,20000"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			b.Fatalf("TIDE_PG_BENCH_BATCHES: %q is not a batch size", f)
		}
		batches = append(batches, n)
	}
	dsn := testenv.Postgres(b)
	c := connect(b, dsn)
	ctx := context.Background()

	// 200-byte documents: {_id: int64, seq: int64, payload: string}.
	const payload = 200 - (4 + 2*(1+4+8) + 1 + 8 + 4 + 1 + 1)
	keys, docs := baselineRows(b, events, payload)

	setup := func(table string) {
		b.Helper()
		for _, q := range []string{
			`DROP TABLE IF EXISTS ` + table,
			`CREATE TABLE ` + table + ` (_id text PRIMARY KEY, doc jsonb, _tide_op text NOT NULL, _tide_cluster_time bigint NOT NULL,
				_tide_deleted boolean NOT NULL DEFAULT false, _tide_synced_at timestamptz NOT NULL DEFAULT now())`,
			`DELETE FROM tide_checkpoints`,
		} {
			if _, err := c.Exec(ctx, q); err != nil && !strings.Contains(q, "tide_checkpoints") {
				b.Fatalf("%s: %v", q, err)
			}
		}
		_, _ = c.Exec(ctx, `CHECKPOINT`) // start each measurement with clean buffers
	}
	measure := func(name string, f func() error) float64 {
		b.Helper()
		start := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return float64(events) / time.Since(start).Seconds()
	}

	rates := map[string][]float64{}
	type run struct {
		name, table string
		f           func() error
	}
	runs := []run{
		{"copy", "copy_baseline", func() error {
			rows := make([][]any, len(keys))
			for i := range keys {
				rows[i] = []any{keys[i], docs[i], "insert", int64(i), false}
			}
			_, err := c.CopyFrom(ctx, pgx.Identifier{"copy_baseline"},
				[]string{"_id", "doc", "_tide_op", "_tide_cluster_time", "_tide_deleted"}, pgx.CopyFromRows(rows))
			return err
		}},
		{"insert", "insert_baseline", func() error {
			const per = 1000
			for from := 0; from < len(keys); from += per {
				tx, err := c.Begin(ctx)
				if err != nil {
					return err
				}
				bt := &pgx.Batch{}
				for i := from; i < min(from+per, len(keys)); i++ {
					bt.Queue(`INSERT INTO insert_baseline (_id, doc, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
						VALUES ($1, $2, 'insert', $3, false, now()) ON CONFLICT (_id) DO UPDATE SET doc = excluded.doc,
						_tide_op = excluded._tide_op, _tide_cluster_time = excluded._tide_cluster_time,
						_tide_deleted = false, _tide_synced_at = excluded._tide_synced_at
						WHERE insert_baseline._tide_cluster_time <= excluded._tide_cluster_time`, keys[i], docs[i], int64(i))
				}
				if err := tx.SendBatch(ctx, bt).Close(); err != nil {
					return err
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, batch := range batches {
		runs = append(runs, run{fmt.Sprintf("mirror/batch=%d", batch), "events", func() error {
			sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: "events", CreateTable: true, SoftDelete: true,
				Pipeline: "bench"})
			src := generate.New(generate.Config{Count: int64(events), PayloadBytes: payload})
			p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: batch, MaxBytes: 64 << 20}, src, encode.Envelope, sink, sink.Checkpoints())
			if err := p.Run(ctx); err != nil {
				return err
			}
			if n := queryInt(b, c, `SELECT count(*) FROM events`); n != int64(events) {
				return fmt.Errorf("wrote %d rows, want %d", n, events)
			}
			return nil
		}})
	}
	b.ResetTimer()
	for range b.N {
		// A new order every round, so that no variant always runs first
		// after a quiet moment or last in a busy one.
		rand.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for _, r := range runs {
			setup(r.table)
			rates[r.name] = append(rates[r.name], measure(r.name, r.f))
		}
	}
	b.StopTimer()

	copyRate, insertRate := testenv.Median(rates["copy"]), testenv.Median(rates["insert"])
	b.ReportMetric(copyRate, "copy-events/s")
	b.ReportMetric(insertRate, "insert-events/s")
	for _, batch := range batches {
		r := testenv.Median(rates[fmt.Sprintf("mirror/batch=%d", batch)])
		b.ReportMetric(r, fmt.Sprintf("mirror%d-events/s", batch))
		b.ReportMetric(r/copyRate, fmt.Sprintf("mirror%d/copy", batch))
		b.ReportMetric(r/insertRate, fmt.Sprintf("mirror%d/insert", batch))
	}
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAppend measures generate → postgres append (the whole
// pipeline, the exactly-once transaction included) against a plain pgx
// CopyFrom of the same rows into a table like the sink's, interleaved
// rounds times, medians reported. After each round the two tables must
// hold the same rows in the same order. TIDE_PG_BENCH_EVENTS and
// TIDE_PG_BENCH_BATCHES as for BenchmarkMirror. Run with -benchtime=Nx.
func BenchmarkAppend(b *testing.B) {
	events := envInt("TIDE_PG_BENCH_EVENTS", 200_000)
	var batches []int
	for _, f := range strings.Split(envString("TIDE_PG_BENCH_BATCHES", "1000,5000,20000"), ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			b.Fatalf("TIDE_PG_BENCH_BATCHES: %q is not a batch size", f)
		}
		batches = append(batches, n)
	}
	dsn := testenv.Postgres(b)
	c := connect(b, dsn)
	ctx := context.Background()
	const payload = 200 - (4 + 2*(1+4+8) + 1 + 8 + 4 + 1 + 1)
	rows := appendBaselineRows(b, events, payload)
	cols := []string{"_namespace", "_op", "_document_key", "_cluster_time_s", "_cluster_time_i", "_wall_time_ms",
		"_full_document", "_before", "_update_desc", "_extra", "_headers", "_resume_token"}
	create := func(table string) {
		b.Helper()
		for _, q := range []string{
			`DROP TABLE IF EXISTS ` + table,
			`CREATE TABLE ` + table + ` (id bigserial PRIMARY KEY, _namespace text, _op text NOT NULL, _document_key jsonb,
				_cluster_time_s bigint, _cluster_time_i bigint, _wall_time_ms bigint, _full_document jsonb, _before jsonb,
				_update_desc jsonb, _extra jsonb, _headers jsonb, _resume_token jsonb, _tide_synced_at timestamptz NOT NULL DEFAULT now())`,
			`DELETE FROM tide_checkpoints`,
		} {
			if _, err := c.Exec(ctx, q); err != nil && !strings.Contains(q, "tide_checkpoints") {
				b.Fatalf("%s: %v", q, err)
			}
		}
		_, _ = c.Exec(ctx, `CHECKPOINT`)
	}
	type run struct {
		name, table string
		f           func() error
	}
	runs := []run{{"copy", "copy_append", func() error {
		_, err := c.CopyFrom(ctx, pgx.Identifier{"copy_append"}, cols, pgx.CopyFromRows(rows))
		return err
	}}}
	for _, batch := range batches {
		table := fmt.Sprintf("append_%d", batch)
		runs = append(runs, run{fmt.Sprintf("append/batch=%d", batch), table, func() error {
			sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: dsn, Table: table, Mode: postgres.ModeAppend, Pipeline: "bench"})
			src := generate.New(generate.Config{Count: int64(events), PayloadBytes: payload})
			p := pipeline.New(pipeline.Config{Name: "bench", MaxRecords: batch, MaxBytes: 64 << 20}, src, encode.Envelope, sink, sink.Checkpoints())
			return p.Run(ctx)
		}})
	}
	rates := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		rand.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for _, r := range runs {
			create(r.table)
			start := time.Now()
			if err := r.f(); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			rates[r.name] = append(rates[r.name], float64(events)/time.Since(start).Seconds())
		}
		b.StopTimer()
		// Same rows, same order, in every table; the generator stamps
		// its events with the time it runs, so the times are left out.
		list := strings.Join(slices.DeleteFunc(slices.Clone(cols), func(c string) bool {
			return c == "_cluster_time_s" || c == "_wall_time_ms"
		}), ", ")
		for _, r := range runs {
			if n := queryInt(b, c, `SELECT count(*) FROM `+r.table); n != int64(events) {
				b.Fatalf("%s wrote %d rows, want %d", r.table, n, events)
			}
		}
		for _, r := range runs {
			if r.table == "copy_append" {
				continue
			}
			if n := queryInt(b, c, `SELECT count(*) FROM ((SELECT row_number() OVER (ORDER BY id), `+list+` FROM `+r.table+`)
				EXCEPT ALL (SELECT row_number() OVER (ORDER BY id), `+list+` FROM copy_append)) AS d`); n != 0 {
				b.Fatalf("%s: %d rows differ from the CopyFrom baseline's", r.name, n)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	copyRate := testenv.Median(rates["copy"])
	b.ReportMetric(copyRate, "copy-events/s")
	for _, batch := range batches {
		r := testenv.Median(rates[fmt.Sprintf("append/batch=%d", batch)])
		b.ReportMetric(r, fmt.Sprintf("append%d-events/s", batch))
		b.ReportMetric(r/copyRate, fmt.Sprintf("append%d/copy", batch))
	}
	b.ReportMetric(0, "ns/op")
}

// appendBaselineRows returns the rows append mode writes for the
// generator's events, read from their envelopes with encoding/json (as
// PostgreSQL's ->> and -> would).
func appendBaselineRows(b testing.TB, n, payload int) [][]any {
	src := generate.New(generate.Config{Count: int64(n), PayloadBytes: payload})
	if err := src.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	evs, err := src.Poll(context.Background(), nil, n)
	if err != nil && len(evs) == 0 {
		b.Fatal(err)
	}
	rows := make([][]any, 0, n)
	for i := range evs {
		data, err := encode.Envelope(nil, &evs[i])
		if err != nil {
			b.Fatal(err)
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(data, &env); err != nil {
			b.Fatal(err)
		}
		text := func(k string) any {
			var s *string
			if err := json.Unmarshal(env[k], &s); err != nil || s == nil {
				return nil
			}
			return *s
		}
		num := func(k string) any {
			var v *int64
			if err := json.Unmarshal(env[k], &v); err != nil || v == nil {
				return nil
			}
			return *v
		}
		js := func(k string) any {
			if v := env[k]; v != nil && string(v) != "null" {
				return []byte(v)
			}
			return nil
		}
		rows = append(rows, []any{text("_namespace"), text("_op"), js("_document_key"), num("_cluster_time_s"),
			num("_cluster_time_i"), num("_wall_time_ms"), js("_full_document"), js("_before"), js("_update_desc"),
			js("_extra"), js("_headers"), js("_resume_token")})
	}
	return rows
}

// baselineRows returns what the mirror writes for the generator's events:
// canonical document keys and relaxed documents.
func baselineRows(b testing.TB, n, payload int) (keys []string, docs [][]byte) {
	src := generate.New(generate.Config{Count: int64(n), PayloadBytes: payload})
	if err := src.Open(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	evs, err := src.Poll(context.Background(), nil, n)
	if err != nil && len(evs) == 0 {
		b.Fatal(err)
	}
	for i := range evs {
		k, err := encode.AppendCanonical(nil, evs[i].DocumentKey)
		if err != nil {
			b.Fatal(err)
		}
		d, err := encode.AppendRelaxed(nil, evs[i].FullDocument)
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, string(k))
		docs = append(docs, d)
	}
	return keys, docs
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
