package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data, and its metadata only where needed to read
// the data back: for an in-place rewrite of the same length, no metadata.
func fdatasync(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
