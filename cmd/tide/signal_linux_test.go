package main

import (
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
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
	cmd := tideCmd(t, dir, "run", "-f", cfg, "--progress", "never")
	var stderr testenv.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // waited for below
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stderr.String(), "waiting for MongoDB") {
		select {
		case err := <-exited:
			t.Fatalf("tide run ended while MongoDB was unreachable: %v\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no 'waiting for MongoDB' within 30 s:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("tide run after SIGTERM while waiting for MongoDB: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tide run did not stop within 20 s of SIGTERM:\n%s", stderr.String())
	}
}
