//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package file

import (
	"errors"
	"os"
)

func flock(*os.File) (bool, error) {
	return false, errors.New("file sink: file locking is not supported on this platform")
}
