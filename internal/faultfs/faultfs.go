// Package faultfs is the seam between durable code and the file system.
//
// Code that must survive a power cut (the checkpoint store, the file sink,
// the embedded server's journal) opens, writes, syncs and renames its files
// through an FS. In production that is OS, the operating system itself: its
// files are *os.File, so the seam costs one interface call. In tests it is a
// *Disk, which passes every operation through to the real files but also
// remembers what a power cut could take away, and Cut puts the files into
// such a state: every write after a file's last fsync discarded, except a
// prefix of them in order, the last of which may be torn at any byte; and
// every create, rename or remove not followed by an fsync of its directory
// possibly undone.
//
// Reads, directory listings and Stat need no seam: they see the files as
// they are, before and after a cut.
package faultfs

import (
	"io"
	"io/fs"
	"os"
)

// File is the part of *os.File that durable code uses. It is an alias of
// an interface literal, so that a public package can declare the same
// file and file-system interfaces (checkpoint.FS, file.FS, deadletter.FS)
// without naming this internal package, and a *Disk satisfies them.
type File = interface {
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
	Fd() uintptr // for flock; a *Disk file's descriptor is the real one
}

// FS is the set of operations that change what is on disk.
type FS interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename is os.Rename.
	Rename(oldpath, newpath string) error
	// Remove is os.Remove.
	Remove(name string) error
	// SyncDir makes the creates, renames and removes in dir durable.
	SyncDir(dir string) error
}

// OS is the real file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File must not become a non-nil File
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err // *PathError names the directory
	}
	return d.Close()
}

// Create is os.Create through fsys.
func Create(fsys FS, name string) (File, error) {
	return fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// WriteFile is os.WriteFile through fsys. Like os.WriteFile it does not
// sync.
func WriteFile(fsys FS, name string, data []byte, perm fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
