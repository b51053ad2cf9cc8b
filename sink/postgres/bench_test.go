package postgres_test

import (
	"context"
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
			sink := postgres.New(postgres.Config{DSN: dsn, Table: "events", CreateTable: true, SoftDelete: true,
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

	med := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	copyRate, insertRate := med(rates["copy"]), med(rates["insert"])
	b.ReportMetric(copyRate, "copy-events/s")
	b.ReportMetric(insertRate, "insert-events/s")
	for _, batch := range batches {
		r := med(rates[fmt.Sprintf("mirror/batch=%d", batch)])
		b.ReportMetric(r, fmt.Sprintf("mirror%d-events/s", batch))
		b.ReportMetric(r/copyRate, fmt.Sprintf("mirror%d/copy", batch))
		b.ReportMetric(r/insertRate, fmt.Sprintf("mirror%d/insert", batch))
	}
	b.ReportMetric(0, "ns/op")
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
