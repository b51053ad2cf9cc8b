package file

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockSuffix names the lock file beside the sink file.
//
// The lock is a separate file, not a flock on the sink file itself, for
// two reasons. A flock belongs to an inode: when the sink file is renamed
// away (logrotate's default) or replaced, a lock on it would go with the
// old inode, and a second pipeline could lock the new file at the same
// path; the lock file stays at its path whatever happens to the data.
// And it can hold the owner's name and PID without putting anything into
// the data. The lock file is never removed: removing it would let a
// second pipeline lock a new file at the path while a third still holds
// the old one. It is harmless when no process holds it, since only the
// flock counts.
const lockSuffix = ".tide-lock"

// owner identifies the pipeline that writes the file.
type owner struct {
	Pipeline string `json:"pipeline,omitempty"`
	DataDir  string `json:"data_dir,omitempty"` // absolute
	PID      int    `json:"pid,omitempty"`      // in the lock file only
}

// same reports whether o and other are the same pipeline, in whichever
// process.
func (o owner) same(other owner) bool {
	return o.Pipeline == other.Pipeline && o.DataDir == other.DataDir
}

// describe names the owner for a message: `pipeline "x" (pid 12, data
// directory /d)`. The PID is left out when o has none.
func (o owner) describe() string {
	name := "another tide pipeline"
	if o.Pipeline != "" {
		name = fmt.Sprintf("pipeline %q", o.Pipeline)
	}
	var details []string
	if o.PID != 0 {
		details = append(details, fmt.Sprintf("pid %d", o.PID))
	}
	if o.DataDir != "" {
		details = append(details, "data directory "+o.DataDir)
	}
	if len(details) == 0 {
		return name
	}
	return name + " (" + strings.Join(details, ", ") + ")"
}

// lock takes the sink file's lock, held until Close, and records us as
// its owner. The kernel releases it when the process exits, however it
// exits, so a crashed pipeline never leaves it stale.
func (s *Sink) lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("file sink: open lock file: %w", err)
	}
	held, err := flock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: lock %s: %w", path, err)
	}
	if held {
		f.Close()
		o := readOwner(path)
		return nil, &InUseError{Path: s.path, Pipeline: o.Pipeline, PID: o.PID, DataDir: o.DataDir}
	}
	me := s.owner
	me.PID = os.Getpid()
	b, _ := json.Marshal(me) // a struct of strings and an int always marshals
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: write lock file: %w", err)
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("file sink: write lock file: %w", err)
	}
	return f, nil
}

// readOwner reads the owner a lock file or marker records; the zero owner
// if it cannot (the holder has not written it yet).
func readOwner(path string) owner {
	var o owner
	b, err := os.ReadFile(path)
	if err == nil {
		json.Unmarshal(b, &o) // a partial or foreign content leaves o zero: "unknown"
	}
	return o
}

// ownerOf returns the owner that cfg names, with its data directory made
// absolute so that two spellings of one directory compare equal.
func ownerOf(pipeline, dataDir string) (owner, error) {
	o := owner{Pipeline: pipeline}
	if dataDir != "" {
		abs, err := filepath.Abs(dataDir)
		if err != nil {
			return owner{}, fmt.Errorf("file sink: data directory: %w", err)
		}
		o.DataDir = abs
	}
	return o, nil
}
