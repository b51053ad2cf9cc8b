package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// stuckTide is a `tide run` whose stdout sink cannot make progress: its
// standard output is a pipe nobody reads, and the pipe is full.
type stuckTide struct {
	cmd    *exec.Cmd
	out    *os.File      // the pipe's read end; reading it unblocks the sink
	logs   io.ReadCloser // tide's stderr
	stderr strings.Builder
	sc     *bufio.Scanner
}

// startStuckTide starts `tide run` with the given extra flags and returns
// once its sink is blocked, with a first SIGTERM sent: from then on no
// drain can finish.
func startStuckTide(t *testing.T, flags ...string) *stuckTide {
	t.Helper()
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
	t.Cleanup(func() { r.Close() })
	s := &stuckTide{out: r, cmd: tideCmd(t, dir, append([]string{"run", "-f", cfg}, flags...)...)}
	s.cmd.Stdout = w
	if s.logs, err = s.cmd.StderrPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { s.cmd.Process.Kill() }) // a no-op once it exited
	s.sc = bufio.NewScanner(s.logs)

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
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitLog reads tide's log until a line containing what.
func (s *stuckTide) waitLog(what string) {
	for s.sc.Scan() {
		s.stderr.WriteString(s.sc.Text() + "\n")
		if strings.Contains(s.sc.Text(), what) {
			return
		}
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
