package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalExitsAtOnce interrupts a drain that cannot finish (the
// stdout sink writes to a pipe nobody reads) with a second signal: tide
// exits 130 at once, through Main, saying why.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: stuck
source:
  generate: {count: 0, rate: 0, payload_bytes: 200}
sink:
  stdout: {}
batch: {commit_interval: 10ms}
`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := tideCmd(t, dir, "run", "-f", cfg, "--drain-timeout", "1m")
	cmd.Stdout = w
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill() // a no-op once it exited

	full := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, size := pipeFill(t, r); size > 0 && n >= size {
			full = true
			break
		}
	}
	if !full {
		t.Fatal("tide did not fill its standard output pipe within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(logs)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "draining") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		rest, _ := io.ReadAll(logs)
		stderr.Write(rest)
		exited <- cmd.Wait()
	}()
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("tide did not exit within 15s of a second signal, with its sink stuck:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("tide run after a second signal: %v, want exit code 130\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "tide: stopped by a second signal") {
		t.Errorf("tide does not say that a second signal stopped it:\n%s", stderr.String())
	}
}
