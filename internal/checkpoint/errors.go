package checkpoint

import (
	"errors"
	"fmt"
)

var errClosed = errors.New("checkpoint: data directory closed")

// CorruptError reports a checkpoint record that cannot be trusted. The
// pipeline must not start from it, nor silently without it.
type CorruptError struct {
	Path   string // the record's file
	Reason string // what is wrong, such as "checksum mismatch"
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("checkpoint %s is corrupt (%s); refusing to start: "+
		"inspect it with `tide checkpoint show -f FILE` and reset it with "+
		"`tide checkpoint reset -f FILE --yes` to start over", e.Path, e.Reason)
}

// InUseError reports a data directory locked by another owner.
type InUseError struct {
	Dir string
	PID int // 0 if the holder had not yet written its PID
}

func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data directory %s is in use by another tide process (pid unknown)", e.Dir)
	}
	return fmt.Sprintf("data directory %s is in use by another tide process (pid %d)", e.Dir, e.PID)
}
