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
