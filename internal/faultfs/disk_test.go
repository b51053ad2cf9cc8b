package faultfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCutWorstCaseKeepsOnlySynced(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk()
	path := filepath.Join(dir, "f")
	f, err := d.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("synced "))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("lost"))
	if got := readFile(t, path); got != "synced lost" {
		t.Fatalf("before the cut the file holds %q", got)
	}
	if err := d.Cut(nil); err != nil {
		t.Fatal(err)
	}
	// The file's name was never made durable by a directory sync.
	if got := readFile(t, path); got != "<absent>" {
		t.Fatalf("after the cut: %q, want the file gone: its directory was never synced", got)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("a write to a file opened before the cut succeeded")
	}

	f, err = d.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("synced "))
	f.Sync()
	if err := d.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("lost"))
	f.Close()
	if err := d.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "synced " {
		t.Fatalf("after the cut: %q, want %q", got, "synced ")
	}
}

func TestCutUndoesRenameWithoutDirSync(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("old"), 0o644) // met on disk: durable
	for _, syncDir := range []bool{false, true} {
		d := NewDisk()
		tmp := filepath.Join(dir, "tmp")
		f, err := Create(d, tmp)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("new"))
		f.Sync()
		f.Close()
		if err := d.Rename(tmp, target); err != nil {
			t.Fatal(err)
		}
		want := "old"
		if syncDir {
			d.SyncDir(dir)
			want = "new"
		}
		if err := d.Cut(nil); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, target); got != want {
			t.Fatalf("dir synced %v: target holds %q, want %q", syncDir, got, want)
		}
		if got := readFile(t, tmp); syncDir && got != "<absent>" {
			t.Fatalf("the renamed temporary is back: %q", got)
		}
		os.Remove(tmp)
	}
}

// TestCutLeavesPrefix appends numbered chunks, syncing some, and cuts at
// random: the file must hold at least what was synced and otherwise a
// prefix of what was written.
func TestCutLeavesPrefix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	os.WriteFile(path, nil, 0o644)
	torn := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		d := NewDisk()
		f, err := d.OpenFile(path, os.O_RDWR|os.O_TRUNC|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Sync()
		var all []byte
		synced := 0
		bounds := map[int]bool{0: true}
		for i := range 1 + rng.IntN(8) {
			chunk := bytes.Repeat([]byte{byte('a' + i)}, 1+rng.IntN(50))
			f.Write(chunk)
			all = append(all, chunk...)
			bounds[len(all)] = true
			if rng.IntN(3) == 0 {
				f.Sync()
				synced = len(all)
			}
		}
		if err := d.Cut(rng); err != nil {
			t.Fatal(err)
		}
		got := []byte(readFile(t, path))
		if len(got) < synced || !bytes.HasPrefix(all, got) {
			t.Fatalf("seed %d: file holds %q; wrote %q, synced %d bytes", seed, got, all, synced)
		}
		if !bounds[len(got)] {
			torn++
		}
	}
	if torn == 0 {
		t.Fatal("no cut ever left part of an unsynced write")
	}
}

func TestFailAfter(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk()
	d.FailAfter(2)
	f, err := Create(d, filepath.Join(dir, "f")) // 1: create
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil { // 2
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("third operation: %v, want ErrPowerCut", err)
	}
	if err := d.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("rename after the power failed: %v, want ErrPowerCut", err)
	}
	if err := d.Cut(nil); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "f")); got != "<absent>" {
		t.Fatalf("f = %q after the cut, want absent", got)
	}
	if _, err := Create(d, filepath.Join(dir, "h")); err != nil {
		t.Fatalf("after Cut the power is back: %v", err)
	}
	if d.Syncs() != 0 {
		t.Fatalf("Syncs = %d, want 0", d.Syncs())
	}
}

func TestOSFS(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(OS, filepath.Join(dir, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := OS.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := OS.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory = %v", err)
	}
	if _, err := OS.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0); err == nil {
		t.Fatal("open of a missing file succeeded")
	}
	if err := OS.Remove(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
}
