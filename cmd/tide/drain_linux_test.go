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
	"unsafe"
)

// TestDrainTimeoutExitsNonZero stops a pipeline whose sink cannot make
// progress: its standard output is a pipe nobody reads. The drain times
// out, and tide must exit non-zero saying so, not 0 as if all was well.
func TestDrainTimeoutExitsNonZero(t *testing.T) {
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
	cmd := tideCmd(t, dir, "run", "-f", cfg, "--drain-timeout", "500ms")
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

	// Once the pipe is full, the sink's next write blocks: from then on
	// no drain can finish.
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
		if strings.Contains(sc.Text(), "drain did not finish") {
			break
		}
	}
	// Unblock the sink so that the hard stop can complete.
	go io.Copy(io.Discard, r)
	rest, _ := io.ReadAll(logs)
	stderr.Write(rest)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("tide run after a drain timed out: %v, want a non-zero exit\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "tide: drain did not finish within --drain-timeout 500ms") {
		t.Errorf("tide does not say that the drain timed out:\n%s", stderr.String())
	}
}

// pipeFill returns how many bytes the pipe r holds and its capacity.
func pipeFill(t *testing.T, r *os.File) (n, size int) {
	t.Helper()
	const fGetPipeSz = 1032 // F_GETPIPE_SZ
	sz, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), fGetPipeSz, 0)
	if errno != 0 {
		t.Fatalf("fcntl F_GETPIPE_SZ: %v", errno)
	}
	var queued int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued))); errno != 0 {
		t.Fatalf("ioctl FIONREAD: %v", errno)
	}
	return int(queued), int(sz)
}
