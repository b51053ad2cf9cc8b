package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/tide-cdc/tide/internal/faultfs"
)

// fdatasync flushes f's data, and its metadata only where needed to read
// the data back: for an in-place rewrite of the same length, no metadata.
// A file that is not an *os.File (a test disk's) is synced as it offers.
func fdatasync(f faultfs.File) error {
	osf, ok := f.(*os.File)
	if !ok {
		return f.Sync()
	}
	if err := unix.Fdatasync(int(osf.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
