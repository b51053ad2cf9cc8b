package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tideBinary is the one tide binary of a test binary, built on first use
// by TideBinary and removed by RemoveTideBinary.
var tideBinary struct {
	once sync.Once
	mu   sync.Mutex // guards the fields below
	dir  string     // temporary directory holding the build
	path string
	err  error // why the binary could not be built
}

// TideBinary returns the path of a tide binary for end-to-end tests. With
// TIDE_BIN set, it is that file. Otherwise TideBinary builds ./cmd/tide of
// this module once per test binary, into a temporary directory that
// RemoveTideBinary, called from TestMain after m.Run, removes. The build
// has the race detector when this test binary has it, so that a -race run
// checks the processes it starts as well.
//
// A build that fails fails the test: an end-to-end test never skips
// because the binary is missing.
func TideBinary(t testing.TB) string {
	t.Helper()
	tideBinary.once.Do(buildTide)
	tideBinary.mu.Lock()
	path, err := tideBinary.path, tideBinary.err
	tideBinary.mu.Unlock()
	if err != nil {
		t.Fatalf("tide binary: %v", err)
	}
	return path
}

// RemoveTideBinary removes the binary TideBinary built, if any. Call it
// from TestMain after m.Run.
func RemoveTideBinary() {
	tideBinary.once.Do(func() {}) // no build after this
	tideBinary.mu.Lock()
	defer tideBinary.mu.Unlock()
	if tideBinary.dir != "" {
		_ = os.RemoveAll(tideBinary.dir)
	}
	tideBinary.dir, tideBinary.path = "", ""
	tideBinary.err = errors.New("removed by RemoveTideBinary, after the tests")
}

func buildTide() {
	tideBinary.mu.Lock()
	defer tideBinary.mu.Unlock()
	if bin := os.Getenv("TIDE_BIN"); bin != "" {
		// Tests run tide in directories of their own: a relative name
		// must not depend on them.
		abs, err := filepath.Abs(bin)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			tideBinary.err = fmt.Errorf("TIDE_BIN: %w", err)
			return
		}
		tideBinary.path = abs
		return
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tideBinary.err = fmt.Errorf("go env GOMOD: %w", err)
		return
	}
	gomod = bytes.TrimSpace(gomod)
	if len(gomod) == 0 || string(gomod) == os.DevNull {
		tideBinary.err = errors.New("go env GOMOD: not inside a module, cannot build ./cmd/tide")
		return
	}
	dir, err := os.MkdirTemp("", "tide-test-bin-")
	if err != nil {
		tideBinary.err = err
		return
	}
	path := filepath.Join(dir, "tide")
	args := []string{"build", "-o", path}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/tide")...)
	cmd.Dir = filepath.Dir(string(gomod))
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		tideBinary.err = fmt.Errorf("go build ./cmd/tide: %w\n%s", err, out)
		return
	}
	tideBinary.dir, tideBinary.path = dir, path
}

// TideProcess is a running `tide run`, started by StartTide.
type TideProcess struct {
	cmd    *exec.Cmd
	stderr Buffer
	exited chan struct{} // closed once the process ended; err is set then
	err    error
}

// StartTide starts `tide run -f file` of bin with the given log level and
// no progress line, its standard error kept for failure messages. The
// test's cleanup kills it if it still runs and waits for it.
func StartTide(t testing.TB, bin, file, logLevel string) *TideProcess {
	t.Helper()
	p := &TideProcess{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "run", "-f", file, "--log-level", logLevel, "--progress", "never")
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start tide: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.exited })
	return p
}

// Exited is closed once the process ended.
func (p *TideProcess) Exited() <-chan struct{} { return p.exited }

// Wait waits for the process to end and returns how it ended.
func (p *TideProcess) Wait() error {
	<-p.exited
	return p.err
}

// Stderr returns what the process wrote to its standard error so far.
func (p *TideProcess) Stderr() string { return p.stderr.String() }

// KillAfter lets the process run for d, then sends SIGKILL and waits for
// it to end. It fails the test if the process ended before.
func (p *TideProcess) KillAfter(t testing.TB, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.exited:
		t.Fatalf("tide exited before it was killed: %v\n%s", p.err, p.Stderr())
	case <-timer.C:
	}
	p.cmd.Process.Kill() // SIGKILL
	<-p.exited
}

// Terminate sends SIGTERM, which drains the pipeline, and returns how the
// process ended.
func (p *TideProcess) Terminate() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	return p.Wait()
}
