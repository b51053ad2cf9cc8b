package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/source/generate"
)

// crashChildEnv holds the DSN when the test binary runs as the crash
// test's child: a generate → postgres (append, checkpoint: sink) pipeline
// of crashCountEnv events.
const (
	crashChildEnv = "TIDE_PG_CRASH_CHILD_DSN"
	crashCountEnv = "TIDE_PG_CRASH_CHILD_COUNT"
)

func crashChild() int {
	count, _ := strconv.ParseInt(os.Getenv(crashCountEnv), 10, 64)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sink := postgres.New(postgres.Config{Columns: postgres.ColumnsDocument, DSN: os.Getenv(crashChildEnv), Table: "events", Mode: postgres.ModeAppend,
		CreateTable: true, Pipeline: "crash", Logger: log})
	src := generate.New(generate.Config{Count: count, PayloadBytes: 16})
	p := pipeline.New(pipeline.Config{Name: "crash", MaxRecords: 1000, Logger: log}, src, encode.Envelope, sink, sink.Checkpoints())
	if err := p.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	return 0
}

// TestSIGKILL kills a process running a 200k-event pipeline (generate →
// postgres, append mode, checkpoint: sink) 10 times at random moments.
// Append mode shows any duplicate as an extra row. After each kill the
// table must hold exactly the events up to the checkpoint row's position,
// once each; after the last run, all 200k.
//
// The process is this test binary running the pipeline as tide run wires
// it (runtime, generate source, this sink), and the tide binary itself.
func TestSIGKILL(t *testing.T) {
	count := int64(200_000)
	if testing.Short() {
		count = 20_000
	}
	t.Run("pipeline", func(t *testing.T) {
		dsn := testenv.Postgres(t)
		killLoop(t, dsn, count, func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+dsn, crashCountEnv+"="+strconv.FormatInt(count, 10))
			return cmd
		})
	})
	t.Run("tide", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: not building the tide binary")
		}
		dsn := testenv.Postgres(t)
		tide := testenv.TideBinary(t)
		dir := t.TempDir()
		file := filepath.Join(dir, "crash.yaml")
		yaml := fmt.Sprintf(`name: crash
source:
  generate:
    count: %d
    payload_bytes: 16
sink:
  postgres:
    dsn: ${TIDE_TEST_PG_DSN}
    table: events
    mode: append
checkpoint: sink
data_dir: %s
batch:
  max_records: 1000
`, count, filepath.Join(dir, "data"))
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := func() *exec.Cmd {
			cmd := exec.Command(tide, "run", "-f", file, "--log-level", "warn", "--progress", "never")
			cmd.Env = append(os.Environ(), "TIDE_TEST_PG_DSN="+dsn)
			return cmd
		}
		killLoop(t, dsn, count, cmd)
	})
}

// killLoop starts the process newCmd makes, kills it ten times at random
// moments spread over the run and checks the table after each kill, then
// lets a last run finish.
func killLoop(t *testing.T, dsn string, count int64, newCmd func() *exec.Cmd) {
	const kills = 10
	c := connect(t, dsn)
	check := func(when string) int64 {
		t.Helper()
		// One statement, so one snapshot: a transaction the killed
		// process sent COMMIT for may still land between two queries.
		var cp, rows, distinct, maxSeq int64
		err := c.QueryRow(t.Context(), `SELECT
			coalesce((SELECT (checkpoint->'source'->>'seq')::bigint FROM public.tide_checkpoints WHERE pipeline = 'crash'), 0),
			count(*), count(DISTINCT _full_document->>'seq'),
			coalesce(max((_full_document->>'seq')::bigint), 0) FROM events`).Scan(&cp, &rows, &distinct, &maxSeq)
		if err != nil {
			t.Fatalf("%s: count rows: %v", when, err)
		}
		if rows != cp || distinct != cp || maxSeq != cp {
			t.Fatalf("%s: checkpoint seq %d, but %d rows, %d distinct events, last seq %d: want all equal", when, cp, rows, distinct, maxSeq)
		}
		return cp
	}
	run := func() *exec.Cmd {
		cmd := newCmd()
		cmd.Stderr = t.Output()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	var last int64
	for i := range int64(kills) {
		cmd := run()
		// Kill at a random moment in the i-th eleventh of the work, so
		// that the kills spread over the run whatever the machine's speed.
		span := count / (kills + 1)
		target := max(last+1, i*span+rand.Int64N(span))
		deadline := time.Now().Add(30 * time.Second)
		for checkpointSeqQuiet(c, "crash") < target && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling the database for progress
		}
		time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond) // anywhere in the next batches
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		last = check(fmt.Sprintf("after kill %d", i+1))
		if last >= count {
			t.Fatalf("the run finished before kill %d: make it longer", i+1)
		}
		t.Logf("kill %d: checkpoint at seq %d", i+1, last)
	}
	cmd := run()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	if got := check("after the final run"); got != count {
		t.Fatalf("final checkpoint seq %d, want %d", got, count)
	}
}

// checkpointSeqQuiet is checkpointSeq for polling: 0 while there is no
// checkpoint yet.
func checkpointSeqQuiet(c *pgx.Conn, pipeline string) int64 {
	var seq int64
	err := c.QueryRow(context.Background(), `SELECT coalesce((checkpoint->'source'->>'seq')::bigint, 0)
		FROM public.tide_checkpoints WHERE pipeline = $1`, pipeline).Scan(&seq)
	if err != nil {
		return 0
	}
	return seq
}
