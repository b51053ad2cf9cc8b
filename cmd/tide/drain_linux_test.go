package main

import (
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestDrainTimeoutExitsNonZero stops a pipeline whose sink cannot make
// progress. The drain times out, and tide must exit non-zero saying so,
// not 0 as if all was well.
func TestDrainTimeoutExitsNonZero(t *testing.T) {
	t.Parallel()
	s := startStuckTide(t, "--drain-timeout", "500ms")
	s.waitLog("drain did not finish")
	// Unblock the sink so that the hard stop can complete.
	go io.Copy(io.Discard, s.out)
	rest, _ := io.ReadAll(s.logs)
	s.stderr.Write(rest)
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("tide run after a drain timed out: %v, want a non-zero exit\n%s", err, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "tide: drain did not finish within --drain-timeout 500ms") {
		t.Errorf("tide does not say that the drain timed out:\n%s", s.stderr.String())
	}
}
