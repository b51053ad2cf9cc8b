package file

import (
	"bufio"
	"bytes"
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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

const childEnv = "TIDE_FILE_SINK_TEST_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		writeLoop(dir)
		return
	}
	if path := os.Getenv(holderEnv); path != "" {
		holdLock(path)
		return
	}
	os.Exit(m.Run())
}

// saved is the crash test's checkpoint: what the runtime would store.
type saved struct {
	Seq  int             `json:"seq"`
	Sink json.RawMessage `json:"sink"`
}

// saveAtomic stands in for the checkpoint store: write, fsync, rename.
func saveAtomic(dir string, s saved) error {
	b, _ := json.Marshal(s)
	tmp := filepath.Join(dir, "checkpoint.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	f.Close()
	return os.Rename(tmp, filepath.Join(dir, "checkpoint"))
}

func loadSaved(dir string) (saved, *cdc.Checkpoint, error) {
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if errors.Is(err, fs.ErrNotExist) {
		return saved{}, nil, nil
	}
	if err != nil {
		return saved{}, nil, err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return saved{}, nil, err
	}
	return s, &cdc.Checkpoint{Sink: s.Sink}, nil
}

// crashBatch lines of crashLine bytes (newline included) make each batch larger than the
// sink's buffer, so a kill can land in the middle of a line.
const (
	crashBatch = 600
	crashLine  = 2000
)

func crashRecord(seq int) []byte {
	b := fmt.Appendf(nil, `{"seq":%d,"pad":"`, seq)
	b = append(b, strings.Repeat("x", crashLine-len(b)-3)...)
	return append(b, `"}`...)
}

// checkLines requires path to hold exactly the lines of seq 1 to n.
func checkLines(path string, n int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 2*crashLine)
	seq := 0
	for sc.Scan() {
		seq++
		if seq > n {
			return fmt.Errorf("file has more than the %d checkpointed lines", n)
		}
		if !bytes.Equal(sc.Bytes(), crashRecord(seq)) {
			return fmt.Errorf("line %d is %.40q..., want seq %d", seq, sc.Bytes(), seq)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if seq != n {
		return fmt.Errorf("file has %d lines, want the %d checkpointed", seq, n)
	}
	fi, _ := f.Stat()
	if fi.Size() != int64(n*crashLine) {
		return fmt.Errorf("file has %d bytes, want %d: a torn line is left", fi.Size(), n*crashLine)
	}
	return nil
}

// checkSeqLines requires path to hold exactly the lines of the seqs from
// 1 to n that are k modulo len(crashNamespaces).
func checkSeqLines(path string, n, k int) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && n == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	var want []byte
	for seq := 1; seq <= n; seq++ {
		if seq%len(crashNamespaces) == k {
			want = append(append(want, crashRecord(seq)...), '\n')
		}
	}
	if !bytes.Equal(b, want) {
		return fmt.Errorf("file has %d bytes, want %d (the lines of the %d checkpointed records)", len(b), len(want), n)
	}
	return nil
}

// TestSIGKILLIsExactlyOnce runs the runtime's put, commit, checkpoint loop
// in a child process and kills it at random moments: mid-write, between
// commit and checkpoint, anywhere. After each kill, reopening the sink from
// the checkpoint must leave exactly the checkpointed lines, and the next
// child continues from there, so the file never holds a torn line or a
// duplicate.
func TestSIGKILLIsExactlyOnce(t *testing.T) {
	sigkillLoop(t, false)
}

// TestSIGKILLTemplateIsExactlyOnce is TestSIGKILLIsExactlyOnce with one
// file per namespace: a kill between the fsyncs of two files, or after
// them and before the checkpoint, leaves each file exactly at its
// committed length after the reopen.
func TestSIGKILLTemplateIsExactlyOnce(t *testing.T) {
	sigkillLoop(t, true)
}

// crashNamespaces are the namespaces of the templated crash test: record
// seq goes to crashNamespaces[seq%3].
var crashNamespaces = []string{"db.a", "db.b", "db.c"}

const crashTemplateEnv = "TIDE_FILE_SINK_TEST_TEMPLATE"

func crashPath(dir string, templated bool) string {
	if templated {
		return filepath.Join(dir, "{coll}.jsonl")
	}
	return filepath.Join(dir, "events.jsonl")
}

func sigkillLoop(t *testing.T, templated bool) {
	dir := t.TempDir()
	path := crashPath(dir, templated)
	for i := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		if templated {
			cmd.Env = append(cmd.Env, crashTemplateEnv+"=1")
		}
		cmd.Stderr = t.Output()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		var reported int
		for range 1 + rand.IntN(8) {
			line, err := r.ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("iteration %d: child output: %v", i, err)
			}
			reported, _ = strconv.Atoi(strings.TrimSpace(line))
		}
		// A random delay, not a synchronisation: it spreads the kills over
		// the whole put, commit, checkpoint cycle.
		time.Sleep(rand.N(4 * time.Millisecond))
		cmd.Process.Kill()
		cmd.Wait()

		st, cp, err := loadSaved(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Seq < reported {
			t.Fatalf("iteration %d: checkpoint at seq %d, child reported %d saved", i, st.Seq, reported)
		}
		s := New(Config{Path: path, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err := s.Open(t.Context(), cp); err != nil {
			t.Fatalf("iteration %d: Open after SIGKILL: %v", i, err)
		}
		s.Close()
		if !templated {
			if err := checkLines(path, st.Seq); err != nil {
				t.Fatalf("iteration %d, checkpoint at seq %d: %v", i, st.Seq, err)
			}
			continue
		}
		for k, ns := range crashNamespaces {
			_, coll, _ := strings.Cut(ns, ".")
			if err := checkSeqLines(filepath.Join(dir, coll+".jsonl"), st.Seq, k); err != nil {
				t.Fatalf("iteration %d, checkpoint at seq %d: %s: %v", i, st.Seq, ns, err)
			}
		}
	}
}

// writeLoop is the crash test's child: it resumes from the checkpoint and
// puts, commits and checkpoints batches until it is killed.
func writeLoop(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	st, cp, err := loadSaved(dir)
	if err != nil {
		fail(err)
	}
	templated := os.Getenv(crashTemplateEnv) != ""
	s := New(Config{Path: crashPath(dir, templated)})
	if err := s.Open(ctx, cp); err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	seq := st.Seq
	deadline := time.Now().Add(time.Minute) // never outlive a lost parent for long
	for time.Now().Before(deadline) {
		rs := records(seq+1, seq+crashBatch)
		for i := range rs {
			rs[i].Data = crashRecord(seq + 1 + i)
			if templated {
				rs[i].Namespace = crashNamespaces[(seq+1+i)%len(crashNamespaces)]
			}
		}
		if err := s.Put(ctx, rs); err != nil {
			fail(err)
		}
		state := s.State()
		if err := s.Commit(ctx, cdc.Checkpoint{}); err != nil {
			fail(err)
		}
		seq += crashBatch
		if err := saveAtomic(dir, saved{Seq: seq, Sink: state}); err != nil {
			fail(err)
		}
		fmt.Fprintln(out, seq)
		out.Flush()
	}
	os.Exit(3)
}
