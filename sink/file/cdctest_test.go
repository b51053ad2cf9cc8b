package file_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/sink/file"
)

// TestContract runs the conformance suite: each subtest writes its own
// file, in a directory named after it. Records are large enough that a
// batch overflows the sink's write buffer, so that what was put and not
// committed reaches the file and the reopen has to cut it.
func TestContract(t *testing.T) {
	root := t.TempDir()
	dir := func(t *testing.T) string {
		d := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	newSink := func(t *testing.T, path string) cdc.Sink {
		return file.New(file.Config{Path: path, Pipeline: cdctest.Pipeline, DataDir: filepath.Dir(path),
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New:    func(t *testing.T) cdc.Sink { return newSink(t, filepath.Join(dir(t), "events.jsonl")) },
		Record: largeRecord,
		Committed: func(t *testing.T) [][]byte {
			b, err := os.ReadFile(filepath.Join(dir(t), "events.jsonl"))
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return lines(b)
		},
		FailOpen: func(t *testing.T) cdc.Sink {
			notDir := filepath.Join(dir(t), "not-a-directory")
			if err := os.WriteFile(notDir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return newSink(t, filepath.Join(notDir, "events.jsonl"))
		},
	})
}

// largeRecord is the suite's record i, padded to 400 KiB.
func largeRecord(i int) cdc.Record {
	r := cdctest.DefaultRecord(i)
	r.Data = fmt.Appendf(nil, `{"cdctest":%d,"pad":"%s"}`, i, strings.Repeat("x", 400<<10))
	return r
}

// lines splits committed output into its lines.
func lines(b []byte) [][]byte {
	var out [][]byte
	for line := range bytes.Lines(b) {
		out = append(out, bytes.Clone(bytes.TrimSuffix(line, []byte("\n"))))
	}
	return out
}

// TestContractTemplate runs the conformance suite on a sink writing one
// file per namespace: record i goes to namespace cdctest.c<i%3>. The
// records are read back from all the files and ordered by their number,
// which each file keeps in order.
func TestContractTemplate(t *testing.T) {
	root := t.TempDir()
	dir := func(t *testing.T) string {
		return filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	}
	record := func(i int) cdc.Record {
		r := largeRecord(i)
		r.Namespace = fmt.Sprintf("cdctest.c%d", i%3)
		return r
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink {
			return file.New(file.Config{Path: filepath.Join(dir(t), "{db}", "{coll}.jsonl"), Pipeline: cdctest.Pipeline, DataDir: dir(t),
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		},
		Record: record,
		Committed: func(t *testing.T) [][]byte {
			type numbered struct {
				n    int
				line []byte
			}
			var all []numbered
			for k := range 3 {
				path := filepath.Join(dir(t), "cdctest", fmt.Sprintf("c%d.jsonl", k))
				b, err := os.ReadFile(path)
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				last := -1
				for _, l := range lines(b) {
					var n int
					if _, err := fmt.Sscanf(string(l), `{"cdctest":%d,`, &n); err != nil || n%3 != k || n <= last {
						t.Fatalf("%s holds %.40q after record %d: not its records in order", path, l, last)
					}
					last = n
					all = append(all, numbered{n, l})
				}
			}
			slices.SortFunc(all, func(a, b numbered) int { return a.n - b.n })
			var out [][]byte
			for _, x := range all {
				out = append(out, x.line)
			}
			return out
		},
		FailOpen: func(t *testing.T) cdc.Sink {
			notDir := filepath.Join(root, "not-a-directory-"+strings.NewReplacer("/", "_").Replace(t.Name()))
			if err := os.WriteFile(notDir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return file.New(file.Config{Path: filepath.Join(notDir, "{coll}.jsonl")})
		},
	})
}

// TestContractTemplateLongNames runs the conformance suite on namespaces
// whose file names are too long for the file system, so shortened: 255
// bytes, as long as MongoDB allows, sharing their first 253. The records
// are read back from every file in the database's directory, each of
// which must hold the records of one namespace, in order.
func TestContractTemplateLongNames(t *testing.T) {
	root := t.TempDir()
	dir := func(t *testing.T) string {
		return filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	}
	record := func(i int) cdc.Record {
		r := largeRecord(i)
		r.Namespace = fmt.Sprintf("d.%s%d", strings.Repeat("c", 252), i%3)
		return r
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink {
			return file.New(file.Config{Path: filepath.Join(dir(t), "{db}", "{coll}.jsonl"), Pipeline: cdctest.Pipeline, DataDir: dir(t),
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		},
		Record: record,
		Committed: func(t *testing.T) [][]byte {
			paths, err := filepath.Glob(filepath.Join(dir(t), "d", "*.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) > 3 {
				t.Fatalf("%d files for 3 namespaces: %q", len(paths), paths)
			}
			type numbered struct {
				n    int
				line []byte
			}
			var all []numbered
			for _, path := range paths {
				if name := filepath.Base(path); !strings.Contains(name, "~") || len(name) > 255-len(".tide-new") {
					t.Fatalf("file %s: want a shortened name", name)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				last, k := -1, -1
				for _, l := range lines(b) {
					var n int
					if _, err := fmt.Sscanf(string(l), `{"cdctest":%d,`, &n); err != nil || k >= 0 && n%3 != k || n <= last {
						t.Fatalf("%s holds %.40q after record %d: not one namespace's records in order", path, l, last)
					}
					last, k = n, n%3
					all = append(all, numbered{n, l})
				}
			}
			slices.SortFunc(all, func(a, b numbered) int { return a.n - b.n })
			var out [][]byte
			for _, x := range all {
				out = append(out, x.line)
			}
			return out
		},
		FailOpen: func(t *testing.T) cdc.Sink {
			notDir := filepath.Join(root, "not-a-directory-"+strings.NewReplacer("/", "_").Replace(t.Name()))
			if err := os.WriteFile(notDir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return file.New(file.Config{Path: filepath.Join(notDir, "{coll}.jsonl")})
		},
	})
}
