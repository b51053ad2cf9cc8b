package deadletter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// File keeps dead letters in a JSON-lines file, one letter a line. Write
// appends and fsyncs; a letter whose ID the file holds is not written
// again. It is a cdc.DeadLetterStore.
type File struct {
	pipeline string
	path     string

	mu     sync.Mutex // guards the fields below
	f      FSFile
	end    int64 // the length of the whole lines on disk: where the next write goes
	broken error // a failed write that could not be taken back: writes are refused until a reopen
	seen   map[string]bool
}

// FS opens the dead-letter file (OpenFileFS); tests pass a disk that
// fills up or loses power.
type FS interface {
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (FSFile, error)
}

// FSFile is the part of *os.File that a File uses: what FS.OpenFile
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
	Fd() uintptr
}

var _ cdc.DeadLetterStore = (*File)(nil)

// OpenFile opens (or creates) the dead-letter file at path for the named
// pipeline. A last line cut short by a crash is removed: the batch it
// came from was not checkpointed, so its letters are written again.
func OpenFile(path, pipeline string) (*File, error) {
	return OpenFileFS(faultfs.OS, path, pipeline)
}

// OpenFileFS is OpenFile on fsys.
func OpenFileFS(fsys FS, path, pipeline string) (*File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("dead-letter file: %w", err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dead-letter file: %w", err)
	}
	d := &File{pipeline: pipeline, path: path, f: f, seen: map[string]bool{}}
	end, err := d.scan()
	if err == nil {
		err = f.Truncate(end)
	}
	if err == nil {
		_, err = f.Seek(end, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dead-letter file %s: %w", path, err)
	}
	d.end = end
	return d, nil
}

// scan reads the IDs in the file and returns the length of its whole
// lines.
func (d *File) scan() (int64, error) {
	r := bufio.NewReader(d.f)
	var end int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return end, nil // a line without its newline is torn
		}
		if err != nil {
			return 0, err
		}
		end += int64(len(line))
		var l struct{ ID string }
		if json.Unmarshal(line, &l) == nil && l.ID != "" {
			d.seen[l.ID] = true
		}
	}
}

// Write appends the letters not in the file yet, and returns once they
// are on disk.
func (d *File) Write(_ context.Context, letters []cdc.DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return errors.New("dead-letter file: closed")
	}
	if d.broken != nil {
		return fmt.Errorf("dead-letter file %s: a failed write could not be taken back (%w); restart the pipeline to recover the file", d.path, d.broken)
	}
	var buf bytes.Buffer
	var ids []string
	for _, dl := range letters {
		l, err := New(d.pipeline, dl)
		if err != nil {
			return err
		}
		if d.seen[l.ID] || containsID(ids, l.ID) {
			continue
		}
		line, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("dead letter at %s: %w", dl.Event.Pos, err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
		ids = append(ids, l.ID)
	}
	if buf.Len() == 0 {
		return nil
	}
	if _, err := d.f.Write(buf.Bytes()); err != nil {
		return d.takeBack(fmt.Errorf("dead-letter file %s: %w", d.path, err))
	}
	if err := d.f.Sync(); err != nil {
		return d.takeBack(fmt.Errorf("dead-letter file %s: sync: %w", d.path, err))
	}
	d.end += int64(buf.Len())
	for _, id := range ids {
		d.seen[id] = true
	}
	return nil
}

// takeBack cuts what a failed Write left (a part of a line, on a full
// disk; lines not known to be durable, after a failed sync) off the file,
// so that the letters can be written again, whole, once the batch is
// retried: appended after a torn line, the next letter would be glued to
// it and lost to readers. It returns err, the Write's failure.
func (d *File) takeBack(err error) error {
	if terr := d.f.Truncate(d.end); terr != nil {
		d.broken = terr
		return err
	}
	if _, serr := d.f.Seek(d.end, io.SeekStart); serr != nil {
		d.broken = serr
	}
	return err
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Close closes the file; a second call returns nil.
func (d *File) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// ReadFile returns the letters of a dead-letter file, in the order they
// were written. A torn last line is left out.
func ReadFile(path string) ([]Letter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dead-letter file: %w", err)
	}
	defer f.Close()
	var out []Letter
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("dead-letter file %s: %w", path, err)
		}
		var l Letter
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("dead-letter file %s: line %d: %w", path, n, err)
		}
		out = append(out, l)
	}
}
