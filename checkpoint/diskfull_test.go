package checkpoint

import (
	"errors"
	"syscall"
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// TestDiskFull: a first save on a full disk fails with ENOSPC and leaves
// no file that the next start would refuse; once a checkpoint file exists,
// its saves rewrite pages in place and need no new space, the first save
// after a restart included.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.NewDisk()
	d, err := OpenFS(disk, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	disk.Fill(0)
	err = d.Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`)})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("first save on a full disk: %v, want ENOSPC", err)
	}
	if cp, err := d.Load(t.Context(), "p"); cp != nil || err != nil {
		t.Fatalf("after a failed first save: %v, %v; want no checkpoint and no error", cp, err)
	}
	d.Close()

	disk.Fill(-1)
	d, err = OpenFS(disk, dir, nil)
	if err != nil {
		t.Fatalf("open after a failed first save: %v", err)
	}
	defer d.Close()
	for i, pos := range []string{`{"seq":2}`, `{"seq":3}`} {
		if err := d.Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(pos)}); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	disk.Fill(0) // full again: in-place saves still fit
	for _, pos := range []string{`{"seq":4}`, `{"seq":5}`} {
		if err := d.Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(pos)}); err != nil {
			t.Fatalf("in-place save of %s on a full disk: %v", pos, err)
		}
	}
	cp, err := d.Load(t.Context(), "p")
	if err != nil || string(cp.Source) != `{"seq":5}` {
		t.Fatalf("load: %v, %v; want {\"seq\":5}", cp, err)
	}

	// A restart on the full disk: the first save of the new process
	// reopens the file and writes in place too.
	d.Close()
	d, err = OpenFS(disk, dir, nil)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer d.Close()
	if err := d.Save(t.Context(), "p", cdc.Checkpoint{Source: cdc.Position(`{"seq":6}`)}); err != nil {
		t.Fatalf("first save after a restart on a full disk: %v", err)
	}
	if cp, err := d.Load(t.Context(), "p"); err != nil || string(cp.Source) != `{"seq":6}` {
		t.Fatalf("load after the restart: %v, %v; want {\"seq\":6}", cp, err)
	}
}
