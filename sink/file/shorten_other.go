//go:build !linux

package file

// pathMax is PATH_MAX of macOS and the BSDs: the longest path, with its
// NUL byte.
const pathMax = 1024

// fsNameMax returns the longest file name the file system of dir takes:
// NAME_MAX, 255 bytes on macOS and the BSDs.
func fsNameMax(string) int { return nameMax }
