package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
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

// permissionError explains err, which matches fs.ErrPermission, for a
// checkpoint that this process may not read or write. The record is likely fine, so the way out is to run as the file's
// owner or to fix its mode, never to reset it and lose the position.
func permissionError(path string, err error) error {
	owner, mode := "unknown", "unknown"
	if fi, statErr := os.Stat(path); statErr == nil {
		mode = fi.Mode().Perm().String()
		if uid, ok := fileOwner(fi); ok {
			owner = userName(uid)
		}
	}
	runAs := "unknown"
	if uid := os.Getuid(); uid >= 0 {
		runAs = userName(uid)
	}
	return fmt.Errorf("checkpoint %s: permission denied: the file is owned by %s with mode %s and tide runs as %s; "+
		"this is a permission problem, not a damaged checkpoint: run tide as the file's owner or give it read "+
		"and write access (chmod u+rw, or chown), and do not reset the checkpoint: %w", path, owner, mode, runAs, err)
}

// userName returns "name (uid N)", or "uid N" if the user is unknown.
func userName(uid int) string {
	id := strconv.Itoa(uid)
	if u, err := user.LookupId(id); err == nil {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}
