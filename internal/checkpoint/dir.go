package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tide-cdc/tide/internal/cdc"
)

const (
	fileSuffix = ".checkpoint.json"
	tempInfix  = ".tmp-" // <pipeline>.checkpoint.json.tmp-<random>
	lockName   = "LOCK"
)

// Dir is the durable checkpoint store of one data directory. It is safe for
// concurrent use; Saves of different pipelines proceed in parallel.
type Dir struct {
	path   string
	log    *slog.Logger
	lock   *os.File // holds the flock
	closed atomic.Bool

	mu   sync.Mutex          // guards the fields below
	open map[string]*os.File // one-page checkpoint files, rewritten in place by Save
}

// Open creates dir if needed and takes its single-owner lock. It removes
// temporary files left by a Save that was interrupted by a crash. Close
// releases the lock. A nil log discards.
func Open(dir string, log *slog.Logger) (*Dir, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := makeDir(dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	d := &Dir{path: dir, log: log, lock: lock, open: make(map[string]*os.File)}
	if err := d.removeTemps(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Path returns the directory the store lives in.
func (d *Dir) Path() string { return d.path }

// Close releases the data directory's lock.
func (d *Dir) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	for name, f := range d.open {
		f.Close()
		delete(d.open, name)
	}
	d.mu.Unlock()
	return unlockDir(d.lock)
}

// Load returns the pipeline's last saved checkpoint, or nil and no error
// if none was ever saved. A record that cannot be trusted is a
// *CorruptError, never a nil checkpoint.
func (d *Dir) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := Read(d.path, pipeline)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp := r.Checkpoint()
	return &cp, nil
}

// pageSize is the size of a checkpoint file in the steady state: one
// record padded with spaces to a page, so that it can be rewritten in place.
const pageSize = 4096

// Save replaces the pipeline's checkpoint atomically and durably: after a
// crash of the process at any point, Load returns this checkpoint or the
// previous one.
//
// A record that fits in one page is written in place over the previous
// one, at offset 0 of a file that is exactly one page long, and the file is
// fdatasynced. A one-page write into the page cache is never torn by the
// death of the writer (the kernel copies a page whole), the file's size
// does not change, so the sync flushes one data page and no metadata: this
// is several times cheaper than a rename and a directory sync, and Save
// runs once per batch. The first Save of a pipeline, and a record larger
// than a page, go the slow way: a temporary file, fsync, rename, fsync of
// the directory.
func (d *Dir) Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(pipeline); err != nil {
		return err
	}
	if d.closed.Load() {
		return errClosed
	}
	b, err := encodeRecord(pipeline, cp, time.Now())
	if err != nil {
		return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(b) < pageSize {
		b = padPage(b)
		if f := d.open[pipeline]; f != nil {
			if _, err := f.WriteAt(b, 0); err != nil {
				return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
			}
			if err := fdatasync(f); err != nil {
				return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
			}
			return nil
		}
	}
	if err := d.replaceLocked(pipeline, b); err != nil {
		return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
	}
	return nil
}

// padPage pads a record (which ends in a newline) with spaces to exactly
// one page, ending in a newline. JSON ignores the padding; any damage to it
// is still detected, because the decoder refuses data after the record.
func padPage(b []byte) []byte {
	p := make([]byte, pageSize)
	n := copy(p, b[:len(b)-1])
	for i := n; i < pageSize-1; i++ {
		p[i] = ' '
	}
	p[pageSize-1] = '\n'
	return p
}

// replaceLocked replaces the pipeline's file with content b the slow,
// always-atomic way, and keeps the new file open for in-place saves if it
// is one page long.
func (d *Dir) replaceLocked(pipeline string, b []byte) error {
	if f := d.open[pipeline]; f != nil {
		f.Close()
		delete(d.open, pipeline)
	}
	path := File(d.path, pipeline)
	f, err := os.CreateTemp(d.path, filepath.Base(path)+tempInfix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		f.Close()
		return err
	}
	// The rename is durable only once the directory is.
	if err := syncDir(d.path); err != nil {
		f.Close()
		return err
	}
	if len(b) != pageSize {
		return f.Close()
	}
	d.open[pipeline] = f // the descriptor now names path
	return nil
}

// Reset deletes the pipeline's checkpoint, corrupt or not, so that its
// next run starts over. Resetting a pipeline with no checkpoint is not an
// error.
func (d *Dir) Reset(ctx context.Context, pipeline string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(pipeline); err != nil {
		return err
	}
	if d.closed.Load() {
		return errClosed
	}
	path := File(d.path, pipeline)
	d.mu.Lock()
	if f := d.open[pipeline]; f != nil {
		f.Close()
		delete(d.open, pipeline)
	}
	d.mu.Unlock()
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset checkpoint: %w", err)
	}
	if err := syncDir(d.path); err != nil {
		return fmt.Errorf("reset checkpoint: %w", err)
	}
	d.log.Info("checkpoint reset", "pipeline", pipeline, "path", path)
	return nil
}

// File returns the path of the pipeline's checkpoint in dir.
func File(dir, pipeline string) string {
	return filepath.Join(dir, pipeline+fileSuffix)
}

// ReadRaw returns the bytes of the pipeline's checkpoint file as they are,
// even if the record is corrupt, for `tide checkpoint show`. It takes no
// lock. If there is no checkpoint the error matches fs.ErrNotExist.
func ReadRaw(dir, pipeline string) ([]byte, error) {
	if err := checkName(pipeline); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(File(dir, pipeline))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	return b, nil
}

// Read returns the pipeline's verified record, taking no lock. If there is
// no checkpoint the error matches fs.ErrNotExist; a record that cannot be
// read or trusted is a *CorruptError.
func Read(dir, pipeline string) (*Record, error) {
	if err := checkName(pipeline); err != nil {
		return nil, err
	}
	path := File(dir, pipeline)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, permissionError(path, err)
	}
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error() // the path is in the message already
		}
		return nil, &CorruptError{Path: path, Reason: reason, Err: err}
	}
	return decodeRecord(path, pipeline, b)
}

// checkName rejects pipeline names that are not a plain file name.
func checkName(pipeline string) error {
	switch {
	case pipeline == "":
		return errors.New("checkpoint: empty pipeline name")
	case pipeline == "." || pipeline == "..", !utf8.ValidString(pipeline),
		strings.ContainsAny(pipeline, "/\\\x00"):
		return fmt.Errorf("checkpoint: pipeline name %q is not a legal file name", pipeline)
	}
	return nil
}

// removeTemps deletes temporary files of interrupted Saves. Only the lock
// holder writes temporary files, so none of them is in use.
func (d *Dir) removeTemps() error {
	tmps, err := filepath.Glob(filepath.Join(d.path, "*"+fileSuffix+tempInfix+"*"))
	if err != nil {
		return fmt.Errorf("list temporary checkpoint files: %w", err)
	}
	for _, p := range tmps {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove temporary checkpoint file: %w", err)
		}
		d.log.Debug("removed interrupted checkpoint write", "path", p)
	}
	return nil
}

// makeDir creates dir if it is missing, durably: a rename into a directory
// is only as durable as the directory's own entry in its parent.
func makeDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("data directory %s is not a directory", dir)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return f.Close()
}
