package main

import (
	"errors"
	"io"
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
	s := startStuckTide(t, "--drain-timeout", "1m")
	s.waitLog("draining")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		rest, _ := io.ReadAll(s.logs)
		s.stderr.Write(rest)
		exited <- s.cmd.Wait()
	}()
	var err error
	select {
	case err = <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("tide did not exit within 15s of a second signal, with its sink stuck:\n%s", s.stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("tide run after a second signal: %v, want exit code 130\n%s", err, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "tide: stopped by a second signal") {
		t.Errorf("tide does not say that a second signal stopped it:\n%s", s.stderr.String())
	}
}

// TestSIGTERMWhileWaitingForSource: SIGTERM while tide run still waits
// for an unreachable MongoDB (retrying forever, the default) stops it
// cleanly, exit 0, rather than leaving it to retry or killing it.
func TestSIGTERMWhileWaitingForSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: unreachable
source:
  mongo: {uri: "mongodb://127.0.0.1:1/?connectTimeoutMS=200&serverSelectionTimeoutMS=200", database: shop, collection: orders}
sink:
  file: {path: ./out.jsonl}
`)
	r := startRun(t, "unreachable", dir, cfg)
	waitFor(t, 30*time.Second, "waiting for MongoDB", func() bool { return strings.Contains(r.stderr.String(), "waiting for MongoDB") }, r)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
		if r.err != nil {
			t.Fatalf("tide run after SIGTERM while waiting for MongoDB: %v\n%s", r.err, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("tide run did not stop within 20 s of SIGTERM:\n%s", r.stderr)
	}
}
