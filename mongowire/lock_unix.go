//go:build unix

package mongowire

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockDataDir takes an exclusive lock on dir/mongowire.lock so that two
// servers never write one data directory (mongod refuses the same way,
// with its mongod.lock). The kernel drops the lock when the process dies,
// SIGKILL included, so a restart after a crash is never refused.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "mongowire.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// A lock just released can still be held for a moment by a child
	// process of this program forked before the release and not yet
	// exec'd (the lock belongs to the open file, which the child shares
	// until exec closes it), so a busy lock is tried again briefly before
	// the directory is called in use.
	for deadline := time.Now().Add(lockWait); ; time.Sleep(10 * time.Millisecond) {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another server", dir)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	return f, nil
}

// lockWait is how long a busy data directory lock is tried again.
const lockWait = time.Second
