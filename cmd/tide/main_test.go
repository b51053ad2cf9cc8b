package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMain stops what the end-to-end tests shared: the PostgreSQL server
// and the tide binary.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopPostgres()
	testenv.RemoveTideBinary()
	os.Exit(code)
}

// tideCmd returns a command that runs the tide binary with args in dir:
// the real command line, in a real process that can be SIGKILLed.
func tideCmd(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.TideBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	return cmd
}

// runTide runs tide to completion and returns its combined output.
// sigkillRuns starts tide with args in dir kills times, and SIGKILLs each
// run from least to least + spread after its start, at a moment drawn
// from a seed it logs. A run that exits before its kill fails t.
func sigkillRuns(t *testing.T, dir string, kills int, least, spread time.Duration, args ...string) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for kill := 1; kill <= kills; kill++ {
		cmd := tideCmd(t, dir, args...)
		var stderr testenv.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }() // waited for below
		select {
		case err := <-exited:
			t.Fatalf("tide run exited before kill %d: %v\n%s", kill, err, stderr.String())
		case <-time.After(least + time.Duration(rng.Int64N(int64(spread)))):
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
	}
}

func runTide(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	out, err := tideCmd(t, dir, args...).CombinedOutput()
	return string(out), err
}

func writePipeline(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkSeqFile requires path to hold exactly n JSON lines with
// _full_document.seq 1..n in order.
func checkSeqFile(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	i := 0
	for sc.Scan() {
		i++
		var line struct {
			Namespace string `json:"_namespace"`
			Op        string `json:"_op"`
			Doc       struct {
				ID  int64 `json:"_id"`
				Seq int64 `json:"seq"`
			} `json:"_full_document"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not valid JSON: %v\n%s", i, err, sc.Bytes())
		}
		if line.Doc.Seq != int64(i) || line.Doc.ID != int64(i) || line.Op != "insert" || line.Namespace != "gen.events" {
			t.Fatalf("line %d: got %s, want an insert into gen.events with _id and seq %d", i, sc.Bytes(), i)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("file holds %d lines, want %d", i, n)
	}
}

// TestRunNamesTheFileOnce: tide run takes the pipeline file as its
// argument or as -f, not both unless they agree, and not neither.
func TestRunNamesTheFileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := runTide(t, dir, "run"); err == nil || !strings.Contains(out, "name the pipeline file: tide run FILE (or -f FILE)") {
		t.Errorf("tide run without a file: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "run", "a.yaml", "-f", "b.yaml"); err == nil || !strings.Contains(out, "the pipeline file is given twice, as a.yaml and as -f b.yaml") {
		t.Errorf("tide run with two files: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "run", "a.yaml", "b.yaml"); err == nil || !strings.Contains(out, "accepts at most 1 arg") {
		t.Errorf("tide run with two arguments: %v\n%s", err, out)
	}
}

func TestRunGenerateToFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: gen-to-file
source:
  generate: {count: 5000, payload_bytes: 20}
sink:
  file: {path: ./out/events.jsonl}
batch: {max_records: 700, commit_interval: 50ms}
`)
	out, err := runTide(t, dir, "run", "-f", cfg)
	if err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	checkSeqFile(t, filepath.Join(dir, "out/events.jsonl"), 5000)

	// A second run, the file named as the argument, finds every event
	// committed and has nothing to do.
	out, err = runTide(t, dir, "run", cfg)
	if err != nil {
		t.Fatalf("second tide run: %v\n%s", err, out)
	}
	checkSeqFile(t, filepath.Join(dir, "out/events.jsonl"), 5000)

	out, err = runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil {
		t.Fatalf("checkpoint show: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"seq": 5000`) || !strings.Contains(out, "committed_bytes") {
		t.Errorf("checkpoint show does not name seq 5000 and the file's committed bytes:\n%s", out)
	}
}

// TestCrashGenerateToFile is the exactly-once-into-a-file test: a real tide
// process is SIGKILLed at random moments and restarted each time, and at
// the end the file holds every event exactly once, in order.
func TestCrashGenerateToFile(t *testing.T) {
	const total = 200000
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: crash
source:
  generate: {count: %d, rate: 100000, payload_bytes: 50}
sink:
  file: {path: ./out/events.jsonl}
batch: {max_records: 1000, commit_interval: 20ms}
`, total))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	kills := 0
	for kills < 10 {
		cmd := tideCmd(t, dir, "run", "-f", cfg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("tide run exited early: %v\n%s", err, stderr.String())
			}
			t.Fatalf("tide run finished all %d events before kill %d; the kills must land mid-run", total, kills+1)
		case <-time.After(time.Duration(50+rng.IntN(120)) * time.Millisecond):
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		kills++
	}
	out, err := runTide(t, dir, "run", "-f", cfg)
	if err != nil {
		t.Fatalf("final tide run: %v\n%s", err, out)
	}
	checkSeqFile(t, filepath.Join(dir, "out/events.jsonl"), total)
}

// TestCorruptCheckpointRefused flips bytes in the checkpoint store and
// requires tide run to refuse, saying what is wrong and how to reset.
func TestCorruptCheckpointRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: corrupt
source:
  generate: {count: 100}
sink:
  file: {path: ./out.jsonl}
`)
	if out, err := runTide(t, dir, "run", "-f", cfg); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	var files []string
	filepath.WalkDir(filepath.Join(dir, ".tide"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), "corrupt") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("want one checkpoint file for pipeline corrupt under .tide, found %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Damage both halves: a checkpoint file keeps two pages, and damage
	// to one of them falls back to the other.
	for _, start := range []int{len(data) / 6, len(data)/2 + len(data)/6} {
		for i := start; i < start+4 && i < len(data); i++ {
			data[i] ^= 0x5a
		}
	}
	if err := os.WriteFile(files[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runTide(t, dir, "run", "-f", cfg)
	if err == nil {
		t.Fatalf("tide run accepted a corrupt checkpoint:\n%s", out)
	}
	for _, want := range []string{"corrupt", "tide checkpoint reset"} {
		if !strings.Contains(out, want) {
			t.Errorf("error does not mention %q:\n%s", want, out)
		}
	}
	// The documented way out works.
	if out, err := runTide(t, dir, "checkpoint", "reset", "-f", cfg); err == nil || !strings.Contains(out, "--yes") {
		t.Errorf("checkpoint reset without --yes: err %v, output %s", err, out)
	}
	if out, err := runTide(t, dir, "checkpoint", "reset", "-f", cfg, "--yes"); err != nil {
		t.Fatalf("checkpoint reset: %v\n%s", err, out)
	}
}

// TestSecondRunRefused requires a second tide on the same data directory
// to stop with a message naming the first one's PID.
func TestSecondRunRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: slow
source:
  generate: {count: 0, rate: 10}
sink:
  file: {path: ./out.jsonl}
`)
	first := tideCmd(t, dir, "run", "-f", cfg)
	logs, err := first.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		first.Process.Signal(syscall.SIGTERM)
		first.Wait()
	}()
	// The first run holds the lock once it logs that the pipeline started.
	sc := bufio.NewScanner(logs)
	for sc.Scan() && !strings.Contains(sc.Text(), "pipeline started") {
	}
	go io.Copy(io.Discard, logs) // keep the first run's stderr flowing

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, first.Path, "run", "-f", cfg)
	second.Dir, second.Env = dir, first.Env
	out, err := second.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("second tide run on the same data directory was not refused (err %v):\n%s", err, out)
	}
	if pid := fmt.Sprint(first.Process.Pid); !strings.Contains(string(out), pid) {
		t.Fatalf("refusal does not name the holder's pid %s:\n%s", pid, out)
	}
}

// TestDrainOnSignal sends SIGTERM to an endless pipeline: tide drains,
// commits what it read, and exits 0 with the file matching the checkpoint.
func TestDrainOnSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: drain
source:
  generate: {count: 0, rate: 20000}
sink:
  file: {path: ./out.jsonl}
batch: {commit_interval: 10ms}
`)
	cmd := tideCmd(t, dir, "run", "-f", cfg)
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal only once the pipeline runs: its handler is installed by then.
	var stderr strings.Builder
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "pipeline started") {
			break
		}
	}
	copied := make(chan struct{})
	go func() { // keep reading, so that tide never blocks on a full pipe
		defer close(copied)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
		}
	}()
	time.Sleep(200 * time.Millisecond) // let it stream for a while; any moment will do
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-copied
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tide run after SIGTERM: %v\n%s", err, stderr.String())
	}
	seq := checkpointSeq(t, dir, cfg)
	if seq == 0 {
		t.Fatal("nothing was committed before the drain")
	}
	checkSeqFile(t, filepath.Join(dir, "out.jsonl"), seq)
}

// checkpointSeq is the generate source's seq in the checkpoint that
// `tide checkpoint show` prints for the pipeline file cfg.
func checkpointSeq(t *testing.T, dir, cfg string) int {
	t.Helper()
	out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil {
		t.Fatalf("checkpoint show: %v\n%s", err, out)
	}
	var shown struct {
		Source struct {
			Seq int `json:"seq"`
		} `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("checkpoint show output is not JSON: %v\n%s", err, out)
	}
	return shown.Source.Seq
}

func TestValidateNamesBadKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: bad
source:
  generate: {cuont: 10}
sink:
  file: {path: ./out.jsonl}
`)
	out, err := runTide(t, dir, "validate", "-f", cfg)
	if err == nil {
		t.Fatalf("validate accepted an unknown key:\n%s", out)
	}
	if !strings.Contains(out, "cuont") || !strings.Contains(out, "line 4") {
		t.Errorf("validate error should name the key and its line:\n%s", out)
	}
}

// TestDemo runs tide demo twice: the embedded server, the writer and the
// pipeline end to end, and the second run resumes from the checkpoint.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := runTide(t, dir, "demo", "--events", "400", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("tide demo: %v\n%s", err, out)
	}
	if !strings.Contains(out, "holds exactly the writer's 400 changes, in order") {
		t.Fatalf("first demo did not confirm its output:\n%s", out)
	}
	out, err = runTide(t, dir, "demo", "--events", "300", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("second tide demo: %v\n%s", err, out)
	}
	for _, want := range []string{"resuming from the checkpoint: 400 changes", "holds exactly the writer's 700 changes, in order"} {
		if !strings.Contains(out, want) {
			t.Fatalf("second demo output lacks %q:\n%s", want, out)
		}
	}
	n, err := countLines(filepath.Join(dir, "tide-demo", "orders.jsonl"))
	if err != nil || n != 700 {
		t.Fatalf("orders.jsonl has %d lines (%v), want 700", n, err)
	}
}

// TestPostgresCheckpointInSink runs generate into PostgreSQL with the
// checkpoint in the sink's transaction, and reads it back with
// tide checkpoint show; reset deletes its row.
func TestPostgresCheckpointInSink(t *testing.T) {
	t.Parallel()
	dsn := testenv.Postgres(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: pg
source:
  generate: {count: 2500}
sink:
  postgres: {dsn: "${PG_DSN}", mode: append, table: events}
checkpoint: sink
batch: {max_records: 1000}
`)
	run := func(args ...string) (string, error) {
		cmd := tideCmd(t, dir, args...)
		cmd.Env = append(cmd.Env, "PG_DSN="+dsn)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("run", "-f", cfg); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	out, err := run("checkpoint", "show", "-f", cfg)
	if err != nil {
		t.Fatalf("checkpoint show: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"seq": 2500`) {
		t.Fatalf("checkpoint show does not read seq 2500 from PostgreSQL:\n%s", out)
	}
	out, err = run("checkpoint", "reset", "-f", cfg, "--yes")
	if err != nil || !strings.Contains(out, `checkpoint of pipeline "pg" reset in the tide_checkpoints table of sink.postgres`) {
		t.Fatalf("checkpoint reset of a sink checkpoint: err %v, output:\n%s", err, out)
	}
	if out, err := run("checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "pg" has no checkpoint`) {
		t.Fatalf("checkpoint show after reset: %v\n%s", err, out)
	}
}

// TestPostgresTablePerCollection runs generate over three collections
// into PostgreSQL with table: "{coll}", mode mirror, the checkpoint in the
// sink, SIGKILLs it mid-run twice and lets it finish: each collection's
// table holds exactly its documents.
func TestPostgresTablePerCollection(t *testing.T) {
	t.Parallel()
	const total, colls = 3000, 3
	dsn := testenv.Postgres(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, fmt.Sprintf(`
name: pg-routed
source:
  generate: {count: %d, rate: 1500, collections: %d}
sink:
  postgres: {dsn: "${PG_DSN}", table: "{coll}", mode: mirror, columns: document}
checkpoint: sink
batch: {max_records: 100, commit_interval: 5ms}
`, total, colls))
	cmd := func(args ...string) *exec.Cmd {
		c := tideCmd(t, dir, args...)
		c.Env = append(c.Env, "PG_DSN="+dsn)
		return c
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// checkpointSeq reads the committed position; 0 before the first.
	checkpointSeq := func() int64 {
		var seq int64
		err := conn.QueryRow(t.Context(), `SELECT (checkpoint->'source'->>'seq')::bigint FROM tide_checkpoints WHERE pipeline = 'pg-routed'`).Scan(&seq)
		var pgErr *pgconn.PgError
		if err != nil && !errors.Is(err, pgx.ErrNoRows) && !(errors.As(err, &pgErr) && pgErr.Code == "42P01") { // no row, or no table yet
			t.Fatalf("read the checkpoint: %v", err)
		}
		return seq
	}
	var seq int64
	for range 2 {
		c := cmd("run", "-f", cfg)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once this run committed something of its own.
		deadline := time.Now().Add(time.Minute)
		for before := seq; seq <= before; seq = checkpointSeq() {
			if time.Now().After(deadline) {
				c.Process.Kill()
				c.Wait()
				t.Fatalf("tide run committed nothing past seq %d within a minute", before)
			}
			time.Sleep(10 * time.Millisecond) // polls another process's commits
		}
		c.Process.Kill()
		c.Wait()
	}
	if seq = checkpointSeq(); seq <= 0 || seq >= total {
		t.Fatalf("checkpoint after the kills at seq %d: want one inside the run, or the kills tested nothing", seq)
	}
	if out, err := cmd("run", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for k := range colls {
		table := fmt.Sprintf("events_%d", k)
		var n, bad int64
		err := conn.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE ((doc->>'seq')::bigint - 1) % $1 <> $2 OR doc->>'_id' <> doc->>'seq') FROM `+
			pgx.Identifier{table}.Sanitize(), colls, k).Scan(&n, &bad)
		if err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
		if n != total/colls || bad != 0 {
			t.Errorf("table %s holds %d rows, %d of another collection; want %d of its own", table, n, bad, total/colls)
		}
	}
}
