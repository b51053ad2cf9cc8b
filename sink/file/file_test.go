package file

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

func newSink(t testing.TB, path string) *Sink {
	t.Helper()
	var log *slog.Logger
	if tt, ok := t.(*testing.T); ok {
		log = slog.New(slog.NewTextHandler(tt.Output(), nil))
	}
	s := New(Config{Path: path, Logger: log})
	t.Cleanup(func() { s.Close() })
	return s
}

func records(from, to int) []cdc.Record {
	var rs []cdc.Record
	for i := from; i <= to; i++ {
		rs = append(rs, cdc.Record{
			Event: cdc.Event{Op: cdc.OpInsert, Pos: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i))},
			Data:  fmt.Appendf(nil, `{"seq":%d}`, i),
		})
	}
	return rs
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "{\"seq\":%d}\n", i)
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// putCommit puts rs, commits, and returns the checkpoint the runtime would
// save. With no records it commits with no Put, as the runtime does for a
// batch of markers only.
func putCommit(t *testing.T, s *Sink, rs []cdc.Record) cdc.Checkpoint {
	t.Helper()
	pos := cdc.Position(`{"seq":0}`)
	if len(rs) > 0 {
		if err := s.Put(t.Context(), rs); err != nil {
			t.Fatal(err)
		}
		pos = rs[len(rs)-1].Pos
	}
	cp := cdc.Checkpoint{Source: pos, Sink: s.State()}
	if err := s.Commit(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	return cp
}

func TestWritesLinesAndState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "nested", "events.jsonl")
	s := newSink(t, path)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	cp := putCommit(t, s, records(1, 3))
	want := lines(1, 3)
	if got := readFile(t, path); got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	crc := crc32.Checksum([]byte(want), crc32.MakeTable(crc32.Castagnoli))
	wantState := fmt.Sprintf(`{"committed_bytes":%d,"head_bytes":%d,"head_crc32c":%d,"tail_bytes":%d,"tail_crc32c":%d}`,
		len(want), len(want), crc, len(want), crc)
	if string(cp.Sink) != wantState {
		t.Fatalf("State = %s, want %s", cp.Sink, wantState)
	}
	// A commit with nothing put keeps the same state.
	if err := s.Commit(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	if string(s.State()) != string(cp.Sink) {
		t.Fatalf("State after empty commit = %s, want %s", s.State(), cp.Sink)
	}
}

// TestRestartIsExactlyOnce simulates crashes between commit and checkpoint:
// the file holds a committed batch the checkpoint does not name, and a torn
// half line after it. A restart from the checkpoint replays the batch and
// the file ends up with every record exactly once.
func TestRestartIsExactlyOnce(t *testing.T) {
	tests := map[string]func(t *testing.T, s *Sink, path string){
		"uncommitted put then close": func(t *testing.T, s *Sink, path string) {
			if err := s.Put(t.Context(), records(4, 6)); err != nil {
				t.Fatal(err)
			}
		},
		"committed but checkpoint not saved": func(t *testing.T, s *Sink, path string) {
			putCommit(t, s, records(4, 6))
		},
		"torn line": func(t *testing.T, s *Sink, path string) {
			putCommit(t, s, records(4, 5))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"seq":6`) // the crash cut the write here
			f.Close()
		},
	}
	for name, crash := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			s := newSink(t, path)
			if err := s.Open(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			saved := putCommit(t, s, records(1, 3))
			crash(t, s, path)
			s.Close()

			s = newSink(t, path)
			if err := s.Open(t.Context(), &saved); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, path); got != lines(1, 3) {
				t.Fatalf("after Open, file = %q; want the committed part only", got)
			}
			putCommit(t, s, records(4, 6))
			if got := readFile(t, path); got != lines(1, 6) {
				t.Fatalf("file = %q, want %q", got, lines(1, 6))
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	state := func(s string) *cdc.Checkpoint {
		return &cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`), Sink: []byte(s)}
	}
	tests := map[string]struct {
		content  string // existing file content; "-" for no file
		restored *cdc.Checkpoint
		want     string
	}{
		"existing file, fresh pipeline": {"old line\n", nil, "already holds 9 bytes but the pipeline has no file checkpoint for it"},
		"existing file, no sink state":  {"old line\n", state(""), "move or delete the file, or set another sink.file.path"},
		"file shorter than committed":   {"abc\n", state(`{"committed_bytes":100}`), "is 4 bytes but the checkpoint says 100 bytes were committed: data recorded as durable is missing"},
		"missing file, committed data":  {"-", state(`{"committed_bytes":10}`), "is 0 bytes but the checkpoint says 10 bytes were committed"},
		"foreign sink state":            {"", state(`{"offset":3}`), `checkpoint sink state "{\"offset\":3}" is not {"committed_bytes": N}`},
		"negative length":               {"", state(`{"committed_bytes":-1}`), `is not {"committed_bytes": N}`},
		"state not json":                {"", state(`12`), `is not {"committed_bytes": N}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			if tc.content != "-" {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := newSink(t, path)
			err := s.Open(t.Context(), tc.restored)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v\nwant an error naming %s and containing %q", err, path, tc.want)
			}
			if tc.content != "-" {
				if got := readFile(t, path); got != tc.content {
					t.Fatalf("a refused Open changed the file to %q", got)
				}
			}
		})
	}
}

func TestOpenAcceptsEmptyFileAndNoState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	os.WriteFile(path, nil, 0o644)
	s := newSink(t, path)
	// A checkpoint without sink state (say, the sink was stdout before)
	// and an empty file: nothing to duplicate.
	if err := s.Open(t.Context(), &cdc.Checkpoint{Source: cdc.Position(`{"seq":9}`)}); err != nil {
		t.Fatal(err)
	}
	putCommit(t, s, records(10, 10))
	if got := readFile(t, path); got != lines(10, 10) {
		t.Fatalf("file = %q", got)
	}
}

func TestPutErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	s := newSink(t, path)
	if err := s.Put(t.Context(), records(1, 1)); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Fatalf("Put before Open = %v, want a not-open error", err)
	}
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	bad := []cdc.Record{{Event: cdc.Event{Pos: cdc.Position(`{"seq":7}`)}, Data: []byte("{\"a\":\n1}")}}
	if err := s.Put(t.Context(), bad); err == nil || !strings.Contains(err.Error(), `record at position {"seq":7} contains a newline`) {
		t.Fatalf("Put of a record with a newline = %v", err)
	}
	if err := New(Config{}).Open(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "no path configured") {
		t.Fatalf("Open without a path = %v", err)
	}
}

const (
	benchLine  = 200 // bytes per line, newline included
	benchBatch = 1000
)

func benchRecords() []cdc.Record {
	batch := make([]cdc.Record, benchBatch)
	for i := range batch {
		data := fmt.Appendf(nil, `{"_namespace":"gen.events","_op":"insert","_document_key":{"_id":%09d},"payload":"`, i)
		data = append(data, strings.Repeat("x", benchLine-3-len(data))...)
		data = append(data, `"}`...)
		batch[i] = cdc.Record{Event: cdc.Event{Op: cdc.OpInsert}, Data: data}
	}
	return batch
}

// BenchmarkFileSink measures 1000-line batches of 200 bytes, committed
// (fsynced) per batch, through the sink and through the baseline, a plain
// bufio loop with one fsync per 1000 lines.
func BenchmarkFileSink(b *testing.B) {
	const perBatch = benchBatch
	batch := benchRecords()

	b.Run("sink", func(b *testing.B) {
		s := newSink(b, filepath.Join(b.TempDir(), "events.jsonl"))
		if err := s.Open(b.Context(), nil); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(perBatch * benchLine)
		for b.Loop() {
			if err := s.Put(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			s.State()
			if err := s.Commit(b.Context(), cdc.Checkpoint{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The baseline: a plain bufio loop with one fsync per 1000 lines.
	b.Run("bufio", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "events.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriter(f)
		b.SetBytes(perBatch * benchLine)
		for b.Loop() {
			for i := range batch {
				w.Write(batch[i].Data)
				w.WriteByte('\n')
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFileSinkVsBufio runs one sink batch and one baseline batch per
// iteration, in alternating order, so that both see the same machine load
// and disk queue, and reports the median time of each and the ratio of
// their throughputs (sink/bufio; above 1 means the sink is faster).
// Medians, because fsync latency on a shared machine has a heavy tail.
func BenchmarkFileSinkVsBufio(b *testing.B) {
	batch := benchRecords()
	dir := b.TempDir()
	s := newSink(b, filepath.Join(dir, "sink.jsonl"))
	if err := s.Open(b.Context(), nil); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "bufio.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)

	sinkBatch := func() {
		if err := s.Put(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
		s.State()
		if err := s.Commit(b.Context(), cdc.Checkpoint{}); err != nil {
			b.Fatal(err)
		}
	}
	bufioBatch := func() {
		for i := range batch {
			w.Write(batch[i].Data)
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	timed := func(fn func()) time.Duration {
		start := time.Now()
		fn()
		return time.Since(start)
	}
	var sinkTimes, bufioTimes []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			sinkTimes = append(sinkTimes, timed(sinkBatch))
			bufioTimes = append(bufioTimes, timed(bufioBatch))
		} else {
			bufioTimes = append(bufioTimes, timed(bufioBatch))
			sinkTimes = append(sinkTimes, timed(sinkBatch))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	sinkMedian, bufioMedian := median(sinkTimes), median(bufioTimes)
	b.ReportMetric(sinkMedian, "sink-ns/batch")
	b.ReportMetric(bufioMedian, "bufio-ns/batch")
	b.ReportMetric(bufioMedian/sinkMedian, "sink/bufio")
}

// TestCrashBeforeFirstCheckpoint: a first run that committed bytes but
// died before its first checkpoint save leaves a non-empty file and no
// checkpoint. Its marker says the bytes are its own, so the restart cuts
// them instead of refusing; once a checkpoint is saved the marker goes,
// and a file without a checkpoint is refused again.
func TestCrashBeforeFirstCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	ctx := t.Context()
	first := New(Config{Path: path})
	if err := first.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := first.Put(ctx, []cdc.Record{{Data: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx, cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	first.Close() // the process dies here: no checkpoint was saved

	restart := New(Config{Path: path})
	if err := restart.Open(ctx, nil); err != nil {
		t.Fatalf("restart after a crash before the first checkpoint: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("the crashed first run's %d uncommitted bytes were kept", fi.Size())
	}
	if err := restart.Put(ctx, []cdc.Record{{Data: []byte(`{"a":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := restart.Commit(ctx, cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	restart.CheckpointSaved(cdc.Checkpoint{Sink: restart.State()})
	restart.Close()
	if _, err := os.Stat(path + freshSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("marker still there after a saved checkpoint: %v", err)
	}

	// The checkpoint is gone (say, reset): the file is no longer ours to cut.
	again := New(Config{Path: path})
	err := again.Open(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "no file checkpoint") {
		t.Fatalf("Open of a non-empty file without checkpoint or marker = %v, want a refusal", err)
	}
	if fi, _ := os.Stat(path); fi.Size() == 0 {
		t.Fatal("a refused file was truncated")
	}
}
