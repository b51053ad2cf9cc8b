package faultfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFillFailsGrowingWrites: past the room left, a write that grows a
// file is cut short with ENOSPC; a write within the file still succeeds;
// Fill(-1) frees the space.
func TestFillFailsGrowingWrites(t *testing.T) {
	d := NewDisk()
	path := filepath.Join(t.TempDir(), "f")
	f, err := d.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d.Fill(10)
	if n, err := f.Write([]byte("123456")); n != 6 || err != nil {
		t.Fatalf("write within the room: %d, %v", n, err)
	}
	n, err := f.Write([]byte("abcdefgh"))
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the room: %d, %v; want 4, ENOSPC", n, err)
	}
	if n, err := f.WriteAt([]byte("XY"), 0); n != 2 || err != nil {
		t.Fatalf("overwrite in place on a full disk: %d, %v", n, err)
	}
	if _, err := f.Write([]byte("z")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v", err)
	}
	d.Fill(-1)
	if _, err := f.Write([]byte("z")); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "XY3456abcdz" {
		t.Fatalf("file holds %q", b)
	}
}
