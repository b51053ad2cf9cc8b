package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// ErrPowerCut is what every operation of a *Disk returns once the budget
// set by FailAfter is spent: the power is off.
var ErrPowerCut = errors.New("faultfs: power cut")

// Disk is an FS for tests that simulates power cuts. Every operation goes
// to the real files under it, and the disk remembers, per file, the bytes
// as of its last Sync and the writes and truncations since, and, per
// directory, the creates, renames and removes since its last SyncDir. Cut
// then rewrites the real files into a state a power cut could have left.
//
// A file that the disk first meets already on disk counts as durable. The
// disk tracks files only; directories are assumed durable. It is safe for
// concurrent use: operations are serialized.
type Disk struct {
	mu     sync.Mutex
	base   map[string]*inode // the namespace as of the last cut, for every path seen (nil: absent)
	names  map[string]*inode // the namespace now, for every path seen
	log    []nameOp          // namespace changes since the last cut, in order
	open   []*diskFile
	budget int // operations left before the power fails; <0: no limit
	syncs  int
	// room is how many more bytes files may grow by before writes fail
	// with ENOSPC; <0: no limit (see Fill).
	room int64
}

type inode struct {
	durable []byte   // the content as of the last Sync
	pending []dataOp // writes and truncations since, in order
}

type dataOp struct {
	truncate bool
	off      int64 // write offset, or the truncated size
	data     []byte
}

type nameOp struct {
	path    string // the name created, removed, or renamed to
	from    string // for a rename, the old name
	ino     *inode // the file now at path; nil for a remove
	durable bool   // its directory was synced after it
}

// NewDisk returns a disk with no power cut planned.
func NewDisk() *Disk {
	return &Disk{base: map[string]*inode{}, names: map[string]*inode{}, budget: -1, room: -1}
}

// Fill leaves room for files to grow by n more bytes: a write past that is
// cut short and fails with syscall.ENOSPC, as on a full file system;
// writes within a file's current size still succeed, as blocks already
// allocated do. A negative n removes the limit (space was freed).
func (d *Disk) Fill(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.room = n
}

// fit cuts a write of p at off in a file of size to what the room left
// allows, spending it; d.mu is held.
func (d *Disk) fit(p []byte, off, size int64) ([]byte, error) {
	if d.room < 0 {
		return p, nil
	}
	grow := off + int64(len(p)) - size
	if grow <= 0 {
		return p, nil
	}
	if grow <= d.room {
		d.room -= grow
		return p, nil
	}
	keep := max(size-off, 0) + d.room
	d.room = 0
	return p[:min(int64(len(p)), keep)], syscall.ENOSPC
}

// FailAfter makes every operation after the next n fail with ErrPowerCut,
// without effect, until the next Cut: the power fails at that point.
// Operations are opens that create or truncate, writes, truncations,
// syncs, renames, removes and directory syncs.
func (d *Disk) FailAfter(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.budget = n
}

// Syncs returns how many file syncs the disk has seen.
func (d *Disk) Syncs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncs
}

// spend accounts for one operation; d.mu is held.
func (d *Disk) spend() error {
	if d.budget == 0 {
		return ErrPowerCut
	}
	if d.budget > 0 {
		d.budget--
	}
	return nil
}

// lookup returns the file at path, meeting it if the disk has not seen it;
// d.mu is held.
func (d *Disk) lookup(path string) *inode {
	if ino, ok := d.names[path]; ok {
		return ino
	}
	var ino *inode
	if b, err := os.ReadFile(path); err == nil {
		ino = &inode{durable: b}
	}
	d.base[path] = ino
	d.names[path] = ino
	return ino
}

func abs(name string) string {
	if p, err := filepath.Abs(name); err == nil {
		return p
	}
	return filepath.Clean(name)
}

// OpenFile opens the real file and tracks it.
func (d *Disk) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	path := abs(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.lookup(path)
	creates := ino == nil && flag&os.O_CREATE != 0
	truncates := ino != nil && flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0
	if creates || truncates {
		if err := d.spend(); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	switch {
	case creates:
		ino = &inode{}
		d.names[path] = ino
		d.log = append(d.log, nameOp{path: path, ino: ino})
	case truncates:
		ino.pending = append(ino.pending, dataOp{truncate: true})
	}
	df := &diskFile{File: f, d: d, ino: ino, appends: flag&os.O_APPEND != 0}
	d.open = append(d.open, df)
	return df, nil
}

// Rename renames the real file and remembers it until the directory is
// synced.
func (d *Disk) Rename(oldpath, newpath string) error {
	from, to := abs(oldpath), abs(newpath)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.spend(); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	ino := d.lookup(from)
	d.lookup(to)
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	d.names[to], d.names[from] = ino, nil
	d.log = append(d.log, nameOp{path: to, from: from, ino: ino})
	return nil
}

// Remove removes the real file and remembers it until the directory is
// synced.
func (d *Disk) Remove(name string) error {
	path := abs(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.spend(); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	d.lookup(path)
	if err := os.Remove(name); err != nil {
		return err
	}
	d.names[path] = nil
	d.log = append(d.log, nameOp{path: path})
	return nil
}

// SyncDir makes the namespace changes in dir so far durable. It does not
// sync the real directory: a test needs no real durability.
func (d *Disk) SyncDir(dir string) error {
	dir = abs(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.spend(); err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return &fs.PathError{Op: "sync", Path: dir, Err: errors.New("not a directory")}
	}
	// A rename counts as in the directory of its new name; the durable
	// code here never renames across directories.
	for i := range d.log {
		if filepath.Dir(d.log[i].path) == dir {
			d.log[i].durable = true
		}
	}
	return nil
}

// Cut simulates a power cut and the restart after it. Every open file is
// closed (later operations on it fail), and the real files are rewritten
// to what the disk would hold: of the namespace changes not made durable
// by a directory sync, a random prefix survives; of each file's writes and
// truncations since its last sync, a random prefix survives, the last one
// of which may be torn at a random byte. A nil rng is the worst case:
// nothing that was not synced survives. After Cut, the disk holds the new
// state as durable and the power is on again.
func (d *Disk) Cut(rng *rand.Rand) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.open {
		f.File.Close()
	}
	d.open = nil

	ns := make(map[string]*inode, len(d.names))
	for p := range d.names {
		ns[p] = d.base[p]
	}
	keep := 0
	if rng != nil {
		nondurable := 0
		for _, op := range d.log {
			if !op.durable {
				nondurable++
			}
		}
		keep = rng.IntN(nondurable + 1)
	}
	for _, op := range d.log {
		if !op.durable {
			if keep == 0 {
				continue
			}
			keep--
		}
		if op.from != "" {
			ns[op.from] = nil
		}
		ns[op.path] = op.ino
	}

	after := map[*inode]*inode{}
	paths := make([]string, 0, len(ns))
	for p := range ns {
		paths = append(paths, p)
	}
	slices.Sort(paths) // deterministic for a given rng
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("faultfs: cut: %w", err)
		}
		ino := ns[p]
		if ino == nil {
			continue
		}
		next, ok := after[ino]
		if !ok {
			next = &inode{durable: ino.survivor(rng)}
			after[ino] = next
		}
		if err := os.WriteFile(p, next.durable, 0o644); err != nil {
			return fmt.Errorf("faultfs: cut: %w", err)
		}
		ns[p] = next
	}
	d.base = ns
	d.names = make(map[string]*inode, len(ns))
	for p, ino := range ns {
		d.names[p] = ino
	}
	d.log = nil
	d.budget = -1
	return nil
}

// survivor returns the content the file could have after a power cut.
func (ino *inode) survivor(rng *rand.Rand) []byte {
	b := slices.Clone(ino.durable)
	if rng == nil {
		return b
	}
	n := rng.IntN(len(ino.pending) + 1)
	for _, op := range ino.pending[:n] {
		b = op.apply(b)
	}
	if n < len(ino.pending) {
		if op := ino.pending[n]; !op.truncate && len(op.data) > 0 {
			op.data = op.data[:rng.IntN(len(op.data))] // torn
			b = op.apply(b)
		}
	}
	return b
}

func (op dataOp) apply(b []byte) []byte {
	if op.truncate {
		if int64(len(b)) >= op.off {
			return b[:op.off]
		}
		return append(b, make([]byte, op.off-int64(len(b)))...)
	}
	end := op.off + int64(len(op.data))
	if int64(len(b)) < end {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[op.off:], op.data)
	return b
}

// diskFile is a real open file whose changes the disk records.
type diskFile struct {
	*os.File
	d       *Disk
	ino     *inode
	appends bool
}

func (f *diskFile) Close() error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if i := slices.Index(f.d.open, f); i >= 0 {
		f.d.open = slices.Delete(f.d.open, i, i+1)
	}
	return f.File.Close()
}

func (f *diskFile) Write(p []byte) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if err := f.d.spend(); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	var off int64
	var err error
	if f.appends {
		var fi fs.FileInfo
		if fi, err = f.File.Stat(); err == nil {
			off = fi.Size()
		}
	} else {
		off, err = f.File.Seek(0, io.SeekCurrent)
	}
	if err != nil {
		return 0, err
	}
	fitting, full := f.fit(p, off)
	n, err := f.File.Write(fitting)
	f.record(off, fitting[:n])
	if err == nil && full != nil {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: full}
	}
	return n, err
}

// fit applies the disk's room to a write of p at off; d.mu is held.
func (f *diskFile) fit(p []byte, off int64) ([]byte, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return p, nil // the write reports it
	}
	return f.d.fit(p, off, fi.Size())
}

func (f *diskFile) WriteAt(p []byte, off int64) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if err := f.d.spend(); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	fitting, full := f.fit(p, off)
	n, err := f.File.WriteAt(fitting, off)
	f.record(off, fitting[:n])
	if err == nil && full != nil {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: full}
	}
	return n, err
}

func (f *diskFile) record(off int64, p []byte) {
	if len(p) > 0 {
		f.ino.pending = append(f.ino.pending, dataOp{off: off, data: slices.Clone(p)})
	}
}

func (f *diskFile) Truncate(size int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if err := f.d.spend(); err != nil {
		return &fs.PathError{Op: "truncate", Path: f.Name(), Err: err}
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.ino.pending = append(f.ino.pending, dataOp{truncate: true, off: size})
	return nil
}

// Sync makes the file's content durable. It does not sync the real file.
func (f *diskFile) Sync() error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if err := f.d.spend(); err != nil {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	if _, err := f.File.Stat(); err != nil { // closed by a cut
		return err
	}
	for _, op := range f.ino.pending {
		f.ino.durable = op.apply(f.ino.durable)
	}
	f.ino.pending = nil
	f.d.syncs++
	return nil
}
