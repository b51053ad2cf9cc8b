package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// ownedSink is newSink for a sink owned by the named pipeline.
func ownedSink(t *testing.T, path, pipeline, dataDir string) *Sink {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	s := New(Config{Path: path, Pipeline: pipeline, DataDir: dataDir, Logger: log})
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSecondSinkOnPathRefused opens two sinks of different pipelines on
// one path in one process: the second is refused, naming the first, and
// the file keeps only the first one's lines. Once the first closes, the
// lock is free.
func TestSecondSinkOnPathRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	first := ownedSink(t, path, "alpha", filepath.Join(dir, "a"))
	if err := first.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	saved := putCommit(t, first, records(1, 3))
	first.CheckpointSaved(saved)

	second := ownedSink(t, path, "beta", filepath.Join(dir, "b"))
	err := second.Open(t.Context(), nil)
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second Open = %v, want an InUseError", err)
	}
	if inUse.Pipeline != "alpha" || inUse.PID != os.Getpid() || inUse.DataDir != filepath.Join(dir, "a") {
		t.Fatalf("InUseError names pipeline %q, pid %d, data directory %q; want alpha, %d, %s",
			inUse.Pipeline, inUse.PID, inUse.DataDir, os.Getpid(), filepath.Join(dir, "a"))
	}
	for _, want := range []string{path, `pipeline "alpha"`, fmt.Sprintf("pid %d", os.Getpid()), "stop that pipeline, or set another sink.file.path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not contain %q", err, want)
		}
	}
	// The same pipeline, in the same process, is refused as well: one
	// file, one writer.
	if err := ownedSink(t, path, "alpha", filepath.Join(dir, "a")).Open(t.Context(), &saved); !errors.As(err, &inUse) {
		t.Fatalf("a second sink of the same pipeline: Open = %v, want an InUseError", err)
	}
	putCommit(t, first, records(4, 5))
	if got := readFile(t, path); got != lines(1, 5) {
		t.Fatalf("file = %q, want only the first sink's lines", got)
	}

	first.Close()
	again := ownedSink(t, path, "alpha", filepath.Join(dir, "a"))
	if err := again.Open(t.Context(), &cdc.Checkpoint{Sink: first.State()}); err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
}

const holderEnv = "TIDE_FILE_SINK_TEST_HOLDER"

// TestLockHeldAcrossProcesses opens the sink in a child process: the
// parent is refused, naming the child's PID; after the child is killed
// with SIGKILL the kernel has released the lock and the parent opens.
func TestLockHeldAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holderEnv+"="+path)
	child.Stderr = t.Output()
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := child.StdinPipe() // the child exits when it closes, should we die first
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "open\n" {
		t.Fatalf("child said %q, %v; want open", line, err)
	}

	s := ownedSink(t, path, "parent", dir)
	err = s.Open(t.Context(), nil)
	want := fmt.Sprintf(`file sink %s is in use by pipeline "holder" (pid %d, data directory %s)`, path, child.Process.Pid, dir)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open while another process holds the file = %v\nwant an error containing %q", err, want)
	}

	child.Process.Kill()
	child.Wait()
	killed = true
	// The child committed a line but saved no checkpoint: its marker
	// names it, so the parent, another pipeline, is refused that too.
	err = s.Open(t.Context(), nil)
	if err == nil || !strings.Contains(err.Error(), `that pipeline "holder" (data directory `+dir+`) wrote before its first checkpoint`) {
		t.Fatalf("Open after the holder was killed = %v, want a refusal naming the holder's marker", err)
	}
	// The holder itself, restarted, takes its file back.
	restarted := ownedSink(t, path, "holder", dir)
	if err := restarted.Open(t.Context(), nil); err != nil {
		t.Fatalf("the holder's restart after SIGKILL: %v", err)
	}
}

// holdLock is TestLockHeldAcrossProcesses's child: it opens the sink,
// commits a line, says so, and waits until stdin closes or it is killed.
func holdLock(path string) {
	s := New(Config{Path: path, Pipeline: "holder", DataDir: filepath.Dir(path)})
	ctx := context.Background()
	if err := s.Open(ctx, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := s.Put(ctx, records(1, 1)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := s.Commit(ctx, cdc.Checkpoint{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("open")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
