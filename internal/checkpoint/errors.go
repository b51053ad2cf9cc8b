package checkpoint

import (
	"errors"
	"fmt"
)

var errClosed = errors.New("checkpoint: data directory closed")

// CorruptError reports a checkpoint record that cannot be trusted or
// cannot be read. The pipeline must not start from it, nor silently
// without it.
type CorruptError struct {
	Path   string // the record's file
	Reason string // what is wrong, such as "checksum mismatch"
	Err    error  // the I/O error if the file could not be read, else nil
}

func (e *CorruptError) Error() string {
	what := "is corrupt"
	if e.Err != nil {
		what = "cannot be read"
	}
	return fmt.Sprintf("checkpoint %s %s (%s); refusing to start: "+
		"inspect it with `tide checkpoint show -f FILE` and reset it with "+
		"`tide checkpoint reset -f FILE --yes` to start over", e.Path, what, e.Reason)
}

func (e *CorruptError) Unwrap() error { return e.Err }

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
