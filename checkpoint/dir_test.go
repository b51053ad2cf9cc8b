package checkpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

func openDir(t *testing.T, dir string) *Dir {
	t.Helper()
	d, err := Open(dir, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDirSaveLoad(t *testing.T) {
	tests := map[string]cdc.Checkpoint{
		"position only":   {Source: cdc.Position(`{"seq":42}`)},
		"nothing yet":     {},
		"meta and sink":   {Source: cdc.Position(`{"_data":"8263A1"}`), Meta: map[string]string{"collection_uuid": "abc", "replica_set_id": "rs0"}, Sink: []byte(`{"committed_bytes":123456}`)},
		"indented json":   {Source: cdc.Position("{\n  \"seq\": 7\n}"), Sink: []byte(`{ "committed_bytes" : 1 }`)},
		"number position": {Source: cdc.Position(`18446744073709551615`)},
		"html and unicode": {
			Source: cdc.Position(`{"k":"<a&b> é 😀"}`),
			Meta:   map[string]string{"<k>": "&ü"},
		},
	}
	for name, cp := range tests {
		t.Run(name, func(t *testing.T) {
			d := openDir(t, t.TempDir())
			ctx := t.Context()
			got, err := d.Load(ctx, "p")
			if err != nil || got != nil {
				t.Fatalf("Load before Save = %v, %v; want nil, nil", got, err)
			}
			if err := d.Save(ctx, "p", cp); err != nil {
				t.Fatal(err)
			}
			got, err = d.Load(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(got.Source, cp.Source) || !sameJSON(got.Sink, cp.Sink) || !reflect.DeepEqual(got.Meta, cp.Meta) {
				t.Fatalf("Load = %+v\nwant %+v", got, cp)
			}
			if (got.Source == nil) != (cp.Source == nil) || (got.Sink == nil) != (cp.Sink == nil) {
				t.Fatalf("Load = %+v: nil-ness differs from %+v", got, cp)
			}
		})
	}
}

// sameJSON reports whether a and b are the same JSON value, or both empty.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func TestDirPersistsAcrossOpen(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := d.Save(ctx, "p", cdc.Checkpoint{Source: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Save(ctx, "other", cdc.Checkpoint{Source: cdc.Position(`{"seq":99}`)}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Save(ctx, "p", cdc.Checkpoint{}); !errors.Is(err, errClosed) {
		t.Fatalf("Save after Close = %v, want %v", err, errClosed)
	}

	d = openDir(t, dir)
	for pipeline, want := range map[string]string{"p": `{"seq":4}`, "other": `{"seq":99}`} {
		got, err := d.Load(ctx, pipeline)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Source) != want {
			t.Errorf("Load(%s).Source = %s, want %s", pipeline, got.Source, want)
		}
	}
	r, err := Read(dir, "p")
	if err != nil {
		t.Fatal(err)
	}
	if r.Pipeline != "p" || r.Format != FormatVersion || time.Since(r.SavedAt) > time.Minute {
		t.Errorf("Read = %+v", r)
	}
}

func TestSaveRejectsBadInput(t *testing.T) {
	d := openDir(t, t.TempDir())
	tests := map[string]struct {
		pipeline string
		cp       cdc.Checkpoint
		want     string
	}{
		"empty name":        {"", cdc.Checkpoint{}, "empty pipeline name"},
		"slash in name":     {"a/b", cdc.Checkpoint{}, `pipeline name "a/b" is not a legal file name`},
		"dot dot":           {"..", cdc.Checkpoint{}, `pipeline name ".." is not a legal file name`},
		"position not json": {"p", cdc.Checkpoint{Source: cdc.Position("seq=1")}, `source position is not JSON: "seq=1"`},
		"sink not json":     {"p", cdc.Checkpoint{Sink: []byte("{")}, `sink state is not JSON`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := d.Save(t.Context(), tc.pipeline, tc.cp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(File(d.Path(), "p")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a rejected Save left a file: %v", err)
	}
}

func TestDirRefusesCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	ctx := t.Context()
	cp := cdc.Checkpoint{Source: cdc.Position(`{"seq":1000}`), Meta: map[string]string{"k": "v"}, Sink: []byte(`{"committed_bytes":4096}`)}
	if err := d.Save(ctx, "p", cp); err != nil {
		t.Fatal(err)
	}
	path := File(dir, "p")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	refused := func(t *testing.T, reason string) {
		t.Helper()
		got, err := d.Load(ctx, "p")
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("Load = %+v, %v; want a *CorruptError", got, err)
		}
		if ce.Path != path || !strings.Contains(ce.Reason, reason) {
			t.Fatalf("CorruptError{Path: %q, Reason: %q}; want path %q, reason containing %q", ce.Path, ce.Reason, path, reason)
		}
		msg := err.Error()
		for _, want := range []string{"checkpoint " + path + " is corrupt (", "refusing to start", "tide checkpoint show -f FILE", "tide checkpoint reset -f FILE --yes"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("message %q does not contain %q", msg, want)
			}
		}
	}
	check := func(t *testing.T, content []byte, reason string) {
		t.Helper()
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, reason)
	}

	t.Run("every flipped byte", func(t *testing.T) {
		// The record is padded to a page: flip each byte in place and put it
		// back, rather than rewrite the page each time. A truncating rewrite
		// makes the file system flush on close, thousands of times. After
		// one Save, page 1 holds the record and page 2 none, so there is
		// nothing to fall back to. (TestDirFallsBackToOlderPage flips the
		// bytes of two written pages.)
		if len(good) != 2*pageSize {
			t.Fatalf("the checkpoint file is %d bytes, want two pages", len(good))
		}
		if err := os.WriteFile(path, good, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := range good[:pageSize] {
			if _, err := f.WriteAt([]byte{good[i] ^ 0xff}, int64(i)); err != nil {
				t.Fatal(err)
			}
			refused(t, "") // any reason, but never accepted
			if _, err := f.WriteAt(good[i:i+1], int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != string(good) {
			t.Fatalf("file not restored after the flips: %v", err)
		}
	})
	t.Run("every truncation", func(t *testing.T) {
		end := strings.LastIndexByte(string(good), '}') + 1
		for n := range end {
			check(t, good[:n], "")
		}
	})
	tests := map[string]struct {
		content func() []byte
		reason  string
	}{
		"empty":         {func() []byte { return nil }, "empty file"},
		"truncated":     {func() []byte { return good[:len(good)/2] }, "truncated"},
		"not json":      {func() []byte { return []byte("seq=12\n") }, "not a checkpoint record"},
		"changed value": {func() []byte { return []byte(strings.Replace(string(good), "1000", "2000", 1)) }, "checksum mismatch"},
		"trailing data": {func() []byte { return append(good, "{}"...) }, "unexpected data after the record"},
		"unknown field": {func() []byte { return []byte(strings.Replace(string(good), `"format"`, `"extra": 1, "format"`, 1)) }, `unknown field "extra"`},
		"no checksum": {func() []byte {
			return []byte(strings.Replace(string(good), `"checksum"`, `"checksum": "", "x_"`, 1))
		}, `unknown field "x_"`},
		"unknown version": {func() []byte {
			r := Record{Format: 2, Pipeline: "p", Source: json.RawMessage(`{"seq":1}`)}
			r.Checksum, _ = r.checksum()
			b, _ := json.Marshal(r)
			return b
		}, "unknown format version 2, this tide reads version 1"},
		"other pipeline": {func() []byte {
			b, _ := encodeRecord("q", cp, time.Now())
			return b
		}, `record is for pipeline "q", not "p"`},
		"sha checksum": {func() []byte {
			r := Record{Format: 1, Pipeline: "p", Checksum: "sha256:00"}
			b, _ := json.Marshal(r)
			return b
		}, `missing or unknown checksum "sha256:00"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { check(t, tc.content(), tc.reason) })
	}

	t.Run("unreadable", func(t *testing.T) {
		os.Remove(path)
		if err := os.Mkdir(path, 0o755); err != nil { // read(2) fails with EISDIR
			t.Fatal(err)
		}
		defer os.Remove(path)
		_, err := d.Load(ctx, "p")
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Err == nil || !strings.Contains(err.Error(), "checkpoint "+path+" cannot be read (is a directory); refusing to start") {
			t.Fatalf("Load = %v; want a *CorruptError saying the file cannot be read", err)
		}
	})
	t.Run("reset starts over", func(t *testing.T) {
		check(t, []byte("garbage"), "")
		raw, err := ReadRaw(dir, "p")
		if err != nil || string(raw) != "garbage" {
			t.Fatalf("ReadRaw = %q, %v; want the corrupt bytes", raw, err)
		}
		if err := d.Reset(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Load(ctx, "p"); got != nil || err != nil {
			t.Fatalf("Load after Reset = %v, %v; want nil, nil", got, err)
		}
		if err := d.Reset(ctx, "p"); err != nil {
			t.Fatalf("second Reset = %v, want nil", err)
		}
		if _, err := ReadRaw(dir, "p"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ReadRaw after Reset = %v, want fs.ErrNotExist", err)
		}
	})
}

func TestOpenRejectsFileAsDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	os.WriteFile(path, nil, 0o644)
	if _, err := Open(path, nil); err == nil || !strings.Contains(err.Error(), "data directory "+path+" is not a directory") {
		t.Fatalf("Open of a file = %v", err)
	}
}

func TestOpenLocksDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, nil)
	var ie *InUseError
	if !errors.As(err, &ie) || ie.PID != os.Getpid() {
		t.Fatalf("second Open = %v; want an *InUseError naming pid %d", err, os.Getpid())
	}
	want := fmt.Sprintf("data directory %s is in use by another tide process (pid %d)", dir, os.Getpid())
	if err.Error() != want {
		t.Fatalf("second Open = %q\nwant %q", err, want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	openDir(t, dir) // free again
}

func TestOpenLockHeldByOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startChild(t, "hold-lock", dir)
	if line, _ := out.ReadString('\n'); line != "locked\n" {
		t.Fatalf("child said %q, want locked", line)
	}

	_, err := Open(dir, nil)
	var ie *InUseError
	if !errors.As(err, &ie) || ie.PID != cmd.Process.Pid {
		t.Fatalf("Open = %v; want an *InUseError naming the child's pid %d", err, cmd.Process.Pid)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", cmd.Process.Pid)) {
		t.Fatalf("message %q does not name the child's pid", err)
	}

	// SIGKILL leaves the LOCK file with the dead child's PID; the kernel
	// released the flock, so the directory is free.
	cmd.Process.Kill()
	cmd.Wait()
	if b, _ := os.ReadFile(filepath.Join(dir, lockName)); strings.TrimSpace(string(b)) != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("LOCK holds %q, want the dead child's pid", b)
	}
	openDir(t, dir)
}

// TestSaveSurvivesSIGKILL kills a child that saves in a tight loop at random
// moments; every time, Load must return a whole record at least as new as the
// last one the child reported saved.
func TestSaveSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	iterations := 12
	if testing.Short() {
		iterations = 3
	}
	var last int64
	for i := range iterations {
		cmd, out := startChild(t, "save-loop", dir)
		stop := 1 + rand.IntN(200)
		var reported int64
		for range stop {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("iteration %d: child output: %v", i, err)
			}
			reported, _ = strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		}
		// A random delay, not a synchronisation: it spreads the kills over
		// the whole Save.
		time.Sleep(rand.N(3 * time.Millisecond))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		d, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("iteration %d: Open after SIGKILL: %v", i, err)
		}
		cp, err := d.Load(t.Context(), "crash")
		if err != nil {
			t.Fatalf("iteration %d: Load after SIGKILL: %v", i, err)
		}
		var pos struct{ Seq int64 }
		if cp == nil || json.Unmarshal(cp.Source, &pos) != nil {
			t.Fatalf("iteration %d: Load = %+v, want a position", i, cp)
		}
		if pos.Seq < reported || pos.Seq < last {
			t.Fatalf("iteration %d: Load = seq %d; the child had saved %d (previous run %d)", i, pos.Seq, reported, last)
		}
		if want := fmt.Sprintf(`{"committed_bytes":%d}`, pos.Seq*100); string(cp.Sink) != want {
			t.Fatalf("iteration %d: sink state %s does not belong to seq %d", i, cp.Sink, pos.Seq)
		}
		last = pos.Seq
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*"+tempInfix+"*"))
	if len(tmps) > 1 { // the last child's, at most; the next Open removes it
		t.Errorf("temporary files pile up: %v", tmps)
	}
}

// startChild re-executes the test binary as a child in the given mode and
// returns it with a reader of its standard output.
func startChild(t *testing.T, mode, dir string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "TIDE_CHECKPOINT_TEST_DIR="+dir)
	cmd.Stderr = t.Output()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewReader(stdout)
}

// saveLoop is the crash test's child: it continues the sequence where the
// last run left it and saves as fast as it can, reporting each save.
func saveLoop(dir string) {
	d, err := Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	var seq int64
	if cp, err := d.Load(ctx, "crash"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	} else if cp != nil {
		var pos struct{ Seq int64 }
		json.Unmarshal(cp.Source, &pos)
		seq = pos.Seq
	}
	w := bufio.NewWriter(os.Stdout)
	deadline := time.Now().Add(time.Minute) // never outlive a lost parent for long
	for time.Now().Before(deadline) {
		seq++
		cp := cdc.Checkpoint{
			Source: cdc.Position(fmt.Sprintf(`{"seq":%d}`, seq)),
			Meta:   map[string]string{"pad": strings.Repeat("m", int(seq%300))},
			Sink:   []byte(fmt.Sprintf(`{"committed_bytes":%d}`, seq*100)),
		}
		if err := d.Save(ctx, "crash", cp); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintln(w, seq)
		w.Flush()
	}
	os.Exit(3)
}

// holdLock is the lock test's child: it opens the directory and waits to be
// killed.
func holdLock(dir string) {
	if _, err := Open(dir, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute) // until the parent kills us
	os.Exit(3)
}
