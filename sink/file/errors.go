package file

import "fmt"

// InUseError reports a sink file locked by another pipeline: two writers
// would interleave their lines.
type InUseError struct {
	Path     string // the sink file
	Pipeline string // the holder's pipeline, as its lock file records it; "" if unknown
	PID      int    // the holder's process; 0 if unknown
	DataDir  string // the holder's data directory; "" if unknown
}

func (e *InUseError) Error() string {
	holder := owner{Pipeline: e.Pipeline, PID: e.PID, DataDir: e.DataDir}.describe()
	if e.PID == 0 {
		holder += ", pid unknown" // it had not written the lock file yet
	}
	return fmt.Sprintf("file sink %s is in use by %s: two pipelines appending to one file would interleave their lines; "+
		"stop that pipeline, or set another sink.file.path", e.Path, holder)
}
