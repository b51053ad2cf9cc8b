package mongo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/testenv"
)

var crashBinaryChanges = flag.Int("mongo.sigkill.changes", 10000, "changes written by TestTideRunSIGKILL")

// TestTideRunSIGKILL runs `tide run` against a server living in this test
// process, SIGKILLs it ten times at random moments during a workload of
// inserts, updates and deletes, and restarts it each time: the JSON-lines
// file must hold the whole change sequence, in order, once.
func TestTideRunSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tide binary; skipped with -short")
	}
	e := newEnv(t)
	bin := testenv.TideBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "orders.jsonl")
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := fmt.Sprintf(`name: orders
data_dir: %s
batch:
  commit_interval: 20ms
source:
  mongo:
    uri: %s
    database: shop
    collection: orders
    snapshot: never
sink:
  file:
    path: %s
`, filepath.Join(dir, "data"), e.srv.URI(), out)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func() (*exec.Cmd, *testenv.Buffer) {
		cmd := exec.Command(bin, "run", "-f", file, "--log-level", "warn", "--progress", "never")
		stderr := &testenv.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, stderr
	}

	// The first run must save the start position before the writer begins.
	cmd, stderr := start()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	ckpt := checkpoint.File(filepath.Join(dir, "data"), "orders")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(ckpt); err == nil {
			break
		}
		if isClosed(exited) || time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("tide run saved no checkpoint within 30s; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's files
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited

	// The ten kills are placed by the writer's progress, not by the clock, so
	// that each lands while changes are being written however fast or slow
	// the machine is: kill i waits for a random point in the (i+1)th eleventh
	// of the workload, then for the run to have appended to the file.
	n := *crashBinaryChanges
	seg := n / 11
	rng := rand.New(rand.NewPCG(5, 6))
	marks := make([]int, 10)
	reached := make([]chan struct{}, 10)
	for i := range marks {
		marks[i] = (i+1)*seg + rng.IntN(seg/2+1)
		reached[i] = make(chan struct{})
	}
	next := 0
	progress := func(written int) {
		for next < len(marks) && written >= marks[next] {
			close(reached[next])
			next++
		}
	}
	wctx, stop := context.WithCancel(t.Context())
	defer stop()
	type result struct {
		changes []change
		err     error
	}
	wrote := make(chan result, 1)
	go func() {
		ch, err := workload(wctx, e.coll, n, 11, progress)
		wrote <- result{ch, err}
	}()
	for i := range 10 {
		before := fileSize(t, out)
		cmd, stderr := start()
		<-reached[i]
		grew := time.Now().Add(5 * time.Second)
		for fileSize(t, out) <= before && time.Now().Before(grew) {
			time.Sleep(5 * time.Millisecond) // polling another process's output
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("run %d ended on its own (%v) before the kill; stderr:\n%s", i+1, err, stderr.String())
		}
	}
	res := <-wrote
	if res.err != nil {
		t.Fatalf("workload: %v", res.err)
	}
	cmd, stderr = start()
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
	deadline = time.Now().Add(60 * time.Second)
	for len(readJSONL(t, out)) < len(res.changes) {
		if time.Now().After(deadline) {
			t.Fatalf("file holds %d of %d changes after 60s; stderr:\n%s", len(readJSONL(t, out)), len(res.changes), stderr.String())
		}
		time.Sleep(50 * time.Millisecond) // polling another process's output
	}
	got := readJSONL(t, out)
	if len(got) != len(res.changes) {
		t.Fatalf("file holds %d changes, want %d", len(got), len(res.changes))
	}
	for i, want := range res.changes {
		if got[i] != want {
			t.Fatalf("change %d: file has %v, want %v (lost, duplicated or reordered)", i, got[i], want)
		}
	}
}

// fileSize returns the size of the file at path, 0 if it does not exist.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
