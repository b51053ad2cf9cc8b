package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/sink/postgres"
)

// benchDoc is a 20-field document: 5 strings, 5 int32, 3 int64, 3
// doubles, 2 booleans, a date and an object of two fields (flattened).
// With extra set, it has one more field, extra_<extra>.
func benchDoc(i int, extra int) bson.D {
	d := bson.D{{Key: "_id", Value: int64(i)}}
	for k := range 5 {
		d = append(d, bson.E{Key: fmt.Sprintf("s%d", k), Value: fmt.Sprintf("value %d of %d", k, i)})
	}
	for k := range 5 {
		d = append(d, bson.E{Key: fmt.Sprintf("i%d", k), Value: int32(i*k + k)})
	}
	for k := range 3 {
		d = append(d, bson.E{Key: fmt.Sprintf("l%d", k), Value: int64(i) << (20 + k)})
	}
	for k := range 3 {
		d = append(d, bson.E{Key: fmt.Sprintf("d%d", k), Value: float64(i) / float64(k+3)})
	}
	d = append(d, bson.E{Key: "b0", Value: i%2 == 0}, bson.E{Key: "b1", Value: i%3 == 0},
		bson.E{Key: "at", Value: bson.DateTime(1_700_000_000_000 + int64(i))},
		bson.E{Key: "o", Value: bson.D{{Key: "x", Value: int32(i)}, {Key: "y", Value: "y"}}})
	if extra > 0 {
		d = append(d, bson.E{Key: fmt.Sprintf("extra_%d", extra), Value: int32(extra)})
	}
	return d
}

// benchRecords returns n inserts of benchDoc; with every > 0, the
// documents from each multiple of every on get a new field.
func benchRecords(b testing.TB, n, every int) []cdc.Record {
	recs := make([]cdc.Record, n)
	for i := range n {
		extra := 0
		if every > 0 {
			extra = i / every
		}
		doc, err := bson.Marshal(benchDoc(i, extra))
		if err != nil {
			b.Fatal(err)
		}
		key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int64(i)}})
		recs[i] = cdc.Record{Event: cdc.Event{Pos: cdc.Position(fmt.Sprint(i)), Op: cdc.OpInsert, Namespace: "db.events",
			ClusterTime: cdc.Timestamp{T: 1, I: uint32(i + 1)}, DocumentKey: key, FullDocument: doc}}
	}
	return recs
}

// BenchmarkTypedMirror measures the sink's mirror of 20-field documents,
// exactly-once (the checkpoint in each batch's transaction), with typed
// columns against the document (jsonb) layout, typed with a new field
// every 10,000 rows (an ADD COLUMN in that batch's transaction) against
// typed without, and typed against the fastest plan written by hand for
// the same typed table: COPY of ready values into a staging table and one
// INSERT ... ON CONFLICT per batch. The sink is driven directly (Put,
// Commit), as the pipeline drives it, so that the ratios are the sink's.
// The variants are interleaved, rounds times, medians reported.
//
// TIDE_PG_BENCH_EVENTS sets the rows per measurement (default 200000);
// batches are 20000 rows. Run with -benchtime=Nx; each b.N iteration is
// one round.
func BenchmarkTypedMirror(b *testing.B) {
	events := envInt("TIDE_PG_BENCH_EVENTS", 200_000)
	const batch = 20000
	dsn := testenv.Postgres(b)
	c := connect(b, dsn)
	ctx := context.Background()
	plain := benchRecords(b, events, 0)
	drifting := benchRecords(b, events, 10000)

	reset := func() {
		for _, q := range []string{`DROP TABLE IF EXISTS events`, `DROP TABLE IF EXISTS limit_events`, `DELETE FROM tide_columns`, `DELETE FROM tide_checkpoints`} {
			if _, err := c.Exec(ctx, q); err != nil && !strings.Contains(err.Error(), "does not exist") {
				b.Fatalf("%s: %v", q, err)
			}
		}
		_, _ = c.Exec(ctx, `CHECKPOINT`)
	}
	sinkRun := func(columns string, recs []cdc.Record) func() error {
		return func() error {
			cfg := postgres.DefaultConfig()
			cfg.DSN, cfg.Table, cfg.Columns, cfg.Pipeline = dsn, "events", columns, "bench"
			s := postgres.New(cfg)
			defer s.Close()
			store := s.Checkpoints()
			if _, err := store.Load(ctx, "bench"); err != nil {
				return err
			}
			if err := s.Open(ctx, nil); err != nil {
				return err
			}
			for from := 0; from < len(recs); from += batch {
				to := min(from+batch, len(recs))
				if err := s.Put(ctx, recs[from:to]); err != nil {
					return err
				}
				if err := s.Commit(ctx, cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"n":%d}`, to))}); err != nil {
					return err
				}
			}
			if n := queryInt(b, c, `SELECT count(*) FROM events`); n != int64(len(recs)) {
				return fmt.Errorf("wrote %d rows, want %d", n, len(recs))
			}
			return nil
		}
	}
	limitRows := handRows(events)
	limit := func() error {
		cols := []string{"_id", "s0", "s1", "s2", "s3", "s4", "i0", "i1", "i2", "i3", "i4", "l0", "l1", "l2", "d0", "d1", "d2", "b0", "b1", "at", "o__x", "o__y"}
		types := "_id bigint, s0 text, s1 text, s2 text, s3 text, s4 text, i0 integer, i1 integer, i2 integer, i3 integer, i4 integer, " +
			"l0 bigint, l1 bigint, l2 bigint, d0 double precision, d1 double precision, d2 double precision, b0 boolean, b1 boolean, at timestamptz, o__x integer, o__y text"
		var set []string
		for _, col := range cols[1:] {
			set = append(set, col+" = excluded."+col)
		}
		for _, q := range []string{
			`CREATE TABLE limit_events (` + strings.Replace(types, "_id bigint", "_id bigint PRIMARY KEY", 1) +
				`, _tide_overflow jsonb, _tide_op text NOT NULL, _tide_cluster_time bigint NOT NULL, _tide_deleted boolean NOT NULL DEFAULT false, _tide_synced_at timestamptz NOT NULL DEFAULT now())`,
			`CREATE TEMP TABLE IF NOT EXISTS limit_stage (` + types + `, ct bigint) ON COMMIT DELETE ROWS`,
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
		merge := `INSERT INTO limit_events AS t (` + strings.Join(cols, ", ") + `, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
			SELECT ` + strings.Join(cols, ", ") + `, 'insert', ct, false, now() FROM limit_stage
			ON CONFLICT (_id) DO UPDATE SET ` + strings.Join(set, ", ") + `, _tide_cluster_time = excluded._tide_cluster_time
			WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
		for from := 0; from < len(limitRows); from += batch {
			to := min(from+batch, len(limitRows))
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"limit_stage"}, append(cols, "ct"), pgx.CopyFromRows(limitRows[from:to])); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, merge); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO tide_checkpoints (pipeline, checkpoint) VALUES ('limit', $1)
				ON CONFLICT (pipeline) DO UPDATE SET checkpoint = excluded.checkpoint`, fmt.Sprintf(`{"n":%d}`, to)); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	runs := []struct {
		name string
		f    func() error
	}{
		{"document", sinkRun(postgres.ColumnsDocument, plain)},
		{"typed", sinkRun(postgres.ColumnsAuto, plain)},
		{"typed-drift", sinkRun(postgres.ColumnsAuto, drifting)},
		{"limit", limit},
	}
	// Make tide_columns and tide_checkpoints exist before the first reset.
	if err := sinkRun(postgres.ColumnsAuto, plain[:10])(); err != nil {
		b.Fatal(err)
	}
	rates := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		rand.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for _, r := range runs {
			reset()
			start := time.Now()
			if err := r.f(); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			rates[r.name] = append(rates[r.name], float64(events)/time.Since(start).Seconds())
		}
	}
	b.StopTimer()
	med := func(n string) float64 { return testenv.Median(rates[n]) }
	for _, n := range []string{"document", "typed", "typed-drift", "limit"} {
		b.ReportMetric(med(n), n+"-rows/s")
	}
	b.ReportMetric(med("typed")/med("document"), "typed/document")
	b.ReportMetric(med("typed-drift")/med("typed"), "drift/typed")
	b.ReportMetric(med("typed")/med("limit"), "typed/limit")
	b.ReportMetric(0, "ns/op")
}

// handRows are benchDoc's values, ready for COPY into the hand-written
// plan's staging table.
func handRows(n int) [][]any {
	rows := make([][]any, n)
	for i := range n {
		d := benchDoc(i, 0)
		row := []any{int64(i)}
		for _, e := range d[1:] {
			switch v := e.Value.(type) {
			case bson.DateTime:
				row = append(row, v.Time().UTC())
			case bson.D:
				row = append(row, v[0].Value, v[1].Value)
			default:
				row = append(row, v)
			}
		}
		rows[i] = append(row, int64(1)<<32|int64(i+1))
	}
	return rows
}

// BenchmarkTypedDelta measures a typed mirror's updates: each of n
// updates (two of benchDoc's 20 fields changed, a string and an int32,
// on distinct rows) written from its update description alone
// (full_document delta: an UPDATE per update) against the same updates
// carrying the whole document (update_lookup: the set-based COPY and
// merge), exactly-once, into a table holding the n rows. Only the sink
// is measured: with update_lookup the source also pays MongoDB a lookup
// per update, which delta saves. Medians of interleaved rounds.
//
// TIDE_PG_BENCH_EVENTS sets the updates per measurement (default
// 50000); batches are 20000 events. Each b.N iteration is one round.
func BenchmarkTypedDelta(b *testing.B) {
	events := envInt("TIDE_PG_BENCH_EVENTS", 50_000)
	const batch = 20000
	dsn := testenv.Postgres(b)
	c := connect(b, dsn)
	ctx := context.Background()
	inserts := benchRecords(b, events, 0)
	lookups := make([]cdc.Record, events)
	deltas := make([]cdc.Record, events)
	for i := range events {
		d := benchDoc(i, 0)
		d[1].Value, d[6].Value = fmt.Sprintf("changed %d", i), int32(-i) // s0, i0
		doc, err := bson.Marshal(d)
		if err != nil {
			b.Fatal(err)
		}
		desc, err := bson.Marshal(bson.D{{Key: "updatedFields", Value: bson.D{d[1], d[6]}}, {Key: "removedFields", Value: bson.A{}}, {Key: "truncatedArrays", Value: bson.A{}}})
		if err != nil {
			b.Fatal(err)
		}
		ev := inserts[i].Event
		ev.Op, ev.ClusterTime, ev.FullDocument = cdc.OpUpdate, cdc.Timestamp{T: 2, I: uint32(i + 1)}, doc
		lookups[i] = cdc.Record{Event: ev}
		ev.FullDocument, ev.UpdateDesc = nil, desc
		deltas[i] = cdc.Record{Event: ev}
	}
	write := func(s *postgres.Sink, recs []cdc.Record, seq *int) error {
		for from := 0; from < len(recs); from += batch {
			to := min(from+batch, len(recs))
			if err := s.Put(ctx, recs[from:to]); err != nil {
				return err
			}
			*seq++
			if err := s.Commit(ctx, cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"n":%d}`, *seq))}); err != nil {
				return err
			}
		}
		return nil
	}
	// run loads the rows, untimed, then returns how long the updates took.
	run := func(recs []cdc.Record) (time.Duration, error) {
		for _, q := range []string{`DROP TABLE IF EXISTS events`, `DELETE FROM tide_columns`, `DELETE FROM tide_checkpoints`} {
			if _, err := c.Exec(ctx, q); err != nil && !strings.Contains(err.Error(), "does not exist") {
				return 0, err
			}
		}
		cfg := postgres.DefaultConfig()
		cfg.DSN, cfg.Table, cfg.Pipeline, cfg.PartialUpdates = dsn, "events", "bench", true
		s := postgres.New(cfg)
		defer s.Close()
		if _, err := s.Checkpoints().Load(ctx, "bench"); err != nil {
			return 0, err
		}
		if err := s.Open(ctx, nil); err != nil {
			return 0, err
		}
		seq := 0
		if err := write(s, inserts, &seq); err != nil {
			return 0, err
		}
		_, _ = c.Exec(ctx, `CHECKPOINT`)
		start := time.Now()
		if err := write(s, recs, &seq); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if n := queryInt(b, c, `SELECT count(*) FROM events WHERE s0 LIKE 'changed %' AND i0 <= 0`); n != int64(len(recs)) {
			return 0, fmt.Errorf("%d rows updated, want %d", n, len(recs))
		}
		return took, nil
	}
	if _, err := run(deltas[:10]); err != nil { // tide_columns and tide_checkpoints exist
		b.Fatal(err)
	}
	runs := []struct {
		name string
		recs []cdc.Record
	}{{"delta", deltas}, {"lookup", lookups}}
	rates := map[string][]float64{}
	b.ResetTimer()
	for range b.N {
		rand.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for _, r := range runs {
			took, err := run(r.recs)
			if err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			rates[r.name] = append(rates[r.name], float64(events)/took.Seconds())
		}
	}
	b.StopTimer()
	med := func(n string) float64 { return testenv.Median(rates[n]) }
	b.ReportMetric(med("delta"), "delta-rows/s")
	b.ReportMetric(med("lookup"), "lookup-rows/s")
	b.ReportMetric(med("delta")/med("lookup"), "delta/lookup")
	b.ReportMetric(0, "ns/op")
}
