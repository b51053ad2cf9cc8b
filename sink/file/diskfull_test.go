package file

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/pipeline"
	"github.com/tide-cdc/tide/source/generate"
)

// TestDiskFullLosesNothing fills the disk under a running pipeline
// (generate → file sink, the checkpoint on the same disk): the pipeline
// fails with ENOSPC and records no progress past what is on disk; once
// space is freed, the next run completes the file with every record once,
// in order.
func TestDiskFullLosesNothing(t *testing.T) {
	const total = 20000
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	disk := faultfs.NewDisk()
	encodePos := func(dst []byte, ev *cdc.Event) ([]byte, error) { return append(dst, ev.Pos...), nil }
	run := func() error {
		store, err := checkpoint.OpenFS(disk, filepath.Join(dir, "data"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		p := pipeline.New(pipeline.Config{Name: "full", MaxRecords: 500},
			generate.New(generate.Config{Count: total}), encodePos,
			New(Config{Path: out, Pipeline: "full", DataDir: dir, FS: disk}), store)
		return p.Run(t.Context())
	}

	disk.Fill(100 << 10) // room for a few batches only
	err := run()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("run on a full disk: %v, want ENOSPC", err)
	}
	t.Logf("first run: %v", err)
	store, err := checkpoint.OpenFS(disk, filepath.Join(dir, "data"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := store.Load(t.Context(), "full")
	store.Close()
	if err != nil || cp == nil {
		t.Fatalf("checkpoint after the disk filled: %v, %v; want the last batch that fit", cp, err)
	}
	var seq int
	if _, err := fmt.Sscanf(string(cp.Source), `{"seq":%d}`, &seq); err != nil || seq <= 0 || seq >= total {
		t.Fatalf("checkpoint at %s: want a position inside the run", cp.Source)
	}
	lines := readLines(t, out)
	if len(lines) < seq {
		t.Fatalf("the checkpoint names record %d, the file holds %d lines: progress past what is on disk", seq, len(lines))
	}

	disk.Fill(-1) // space freed
	if err := run(); err != nil {
		t.Fatalf("run after space was freed: %v", err)
	}
	lines = readLines(t, out)
	if len(lines) != total {
		t.Fatalf("file holds %d lines, want %d", len(lines), total)
	}
	for i, l := range lines {
		if want := fmt.Sprintf(`{"seq":%d}`, i+1); l != want {
			t.Fatalf("line %d is %q, want %q (lost, duplicated or reordered)", i+1, l, want)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestDiskFullTemplateLosesNothing is TestDiskFullLosesNothing with one
// file per namespace (generate over three collections).
func TestDiskFullTemplateLosesNothing(t *testing.T) {
	const total, colls = 20000, 3
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "out", "{coll}.jsonl")
	disk := faultfs.NewDisk()
	encodePos := func(dst []byte, ev *cdc.Event) ([]byte, error) { return append(dst, ev.Pos...), nil }
	run := func() error {
		store, err := checkpoint.OpenFS(disk, filepath.Join(dir, "data"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		p := pipeline.New(pipeline.Config{Name: "full", MaxRecords: 500},
			generate.New(generate.Config{Count: total, Collections: colls}), encodePos,
			New(Config{Path: tmpl, Pipeline: "full", DataDir: dir, FS: disk}), store)
		return p.Run(t.Context())
	}
	files := func() [][]string {
		var out [][]string
		for k := range colls {
			path := filepath.Join(dir, "out", fmt.Sprintf("events_%d.jsonl", k))
			if _, err := os.Stat(path); err != nil {
				out = append(out, nil)
				continue
			}
			out = append(out, readLines(t, path))
		}
		return out
	}

	disk.Fill(100 << 10)
	if err := run(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("run on a full disk: %v, want ENOSPC", err)
	}
	store, err := checkpoint.OpenFS(disk, filepath.Join(dir, "data"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := store.Load(t.Context(), "full")
	store.Close()
	if err != nil || cp == nil {
		t.Fatalf("checkpoint after the disk filled: %v, %v", cp, err)
	}
	var seq int
	if _, err := fmt.Sscanf(string(cp.Source), `{"seq":%d}`, &seq); err != nil || seq <= 0 || seq >= total {
		t.Fatalf("checkpoint at %s: want a position inside the run", cp.Source)
	}
	for k, lines := range files() {
		if n := (seq - k + colls - 1) / colls; len(lines) < n { // seqs k+1, k+1+colls, ... up to seq
			t.Fatalf("the checkpoint names record %d, events_%d holds %d lines, want at least %d", seq, k, len(lines), n)
		}
	}

	disk.Fill(-1)
	if err := run(); err != nil {
		t.Fatalf("run after space was freed: %v", err)
	}
	for k, lines := range files() {
		if want := total/colls + min(1, (total%colls)/(k+1)); len(lines) != want {
			t.Fatalf("events_%d holds %d lines, want %d", k, len(lines), want)
		}
		for i, l := range lines {
			if want := fmt.Sprintf(`{"seq":%d}`, k+1+i*colls); l != want {
				t.Fatalf("events_%d line %d is %q, want %q (lost, duplicated or reordered)", k, i+1, l, want)
			}
		}
	}
}
