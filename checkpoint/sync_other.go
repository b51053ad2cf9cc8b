//go:build !linux

package checkpoint

import "github.com/tide-cdc/tide/internal/faultfs"

// fdatasync falls back to a full fsync where fdatasync is not available.
func fdatasync(f faultfs.File) error { return f.Sync() }
