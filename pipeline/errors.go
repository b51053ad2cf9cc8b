package pipeline

import "errors"

// ErrNotRunning is returned by Pause when the pipeline stopped (or never
// ran) before it could pause.
var ErrNotRunning = errors.New("pipeline: pipeline not running")

// errRunTwice is returned by a second call to Run: a Pipeline runs once.
var errRunTwice = errors.New("pipeline: pipeline already ran; create a new one")
