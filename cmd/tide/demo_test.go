package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interruptDemo runs tide demo with args, sends it SIGINT once its status
// line shows a rate of unit/s, and returns its stdout. The demo must
// drain and exit 0.
func interruptDemo(t *testing.T, dir, unit string, args ...string) string {
	t.Helper()
	cmd := tideCmd(t, dir, append([]string{"demo"}, args...)...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A demo that never shows its status line would run for minutes.
	guard := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer guard.Stop()
	// The status line starts after the signal handler is installed and
	// once events flow: interrupt then.
	var logs []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(logs, []byte(unit+"/s")) {
		n, err := stderr.Read(buf)
		logs = append(logs, buf[:n]...)
		if err != nil {
			t.Fatalf("tide demo %s ended before its status line: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), logs)
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	logs = append(logs, rest...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("interrupted tide demo %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), logs)
	}
	return stdout.String()
}

// TestDemoInterrupt stops the MongoDB demo with SIGINT while it writes
// and streams, and requires it to drain and say so, and the next run to
// resume and end with every change the writer made in the file, in
// order.
func TestDemoInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := interruptDemo(t, dir, "changes", "--events", "1000000", "--rate", "2000", "--progress", "always")
	for _, want := range []string{"interrupted: run tide demo again to resume", "the writer's", "changes, in order"} {
		if !strings.Contains(out, want) {
			t.Fatalf("interrupted demo output lacks %q:\n%s", want, out)
		}
	}

	out, err := runTide(t, dir, "demo", "--events", "100", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("demo after the interrupt: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resuming from the checkpoint: ") {
		t.Fatalf("demo after the interrupt does not resume:\n%s", out)
	}
	made, err := readWriterLog(filepath.Join(dir, "tide-demo", "writer.log"))
	if err != nil || len(made) <= 100 {
		t.Fatalf("writer.log holds %d changes (%v), want more than this run's 100", len(made), err)
	}
	if n, _, err := verifyDemoFile(filepath.Join(dir, "tide-demo", "orders.jsonl"), made, 0); err != nil || n != int64(len(made)) {
		t.Fatalf("orders.jsonl holds %d of the writer's %d changes: %v", n, len(made), err)
	}
	if want := fmt.Sprintf("holds exactly the writer's %d changes, in order", len(made)); !strings.Contains(out, want) {
		t.Fatalf("demo after the interrupt lacks %q:\n%s", want, out)
	}
}
