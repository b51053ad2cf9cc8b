//go:build !unix

package mongowire

import "os"

// lockDataDir does not lock on this platform.
func lockDataDir(string) (*os.File, error) { return nil, nil }
