//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package checkpoint

import (
	"errors"
	"os"
)

func lockDir(dir string) (*os.File, error) {
	return nil, errors.New("checkpoint: data directory locking is not supported on this platform")
}

func unlockDir(f *os.File) error { return f.Close() }
