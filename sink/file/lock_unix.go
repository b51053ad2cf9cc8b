//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package file

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive, non-blocking flock on f, and reports whether
// another open file holds it. flock belongs to the open file description,
// so a second sink in the same process is refused as well.
func flock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
