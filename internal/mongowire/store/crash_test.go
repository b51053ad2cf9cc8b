package store

import (
	"os"
)

// crashChild is a stub until the crash test is written.
func crashChild() bool { return os.Getenv("TIDE_STORE_CRASH_CHILD") != "" }
