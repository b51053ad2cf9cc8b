package file

import (
	"io"
	"io/fs"
)

// FS is the set of operations through which a Sink changes what is on
// disk (Config.FS).
type FS interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (FSFile, error)
	// Rename is os.Rename.
	Rename(oldpath, newpath string) error
	// Remove is os.Remove.
	Remove(name string) error
	// SyncDir makes the creates, renames and removes in dir durable.
	SyncDir(dir string) error
}

// FSFile is the part of *os.File that a Sink uses: what FS.OpenFile
// returns.
type FSFile = interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.WriterAt
	io.Seeker
	io.Closer
	Name() string
	Stat() (fs.FileInfo, error)
	Sync() error
	Truncate(size int64) error
	Fd() uintptr // for flock
}
