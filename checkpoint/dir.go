package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
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
	fs     FS
	log    *slog.Logger
	lock   *os.File // holds the flock
	closed atomic.Bool

	mu   sync.Mutex           // guards the fields below
	open map[string]*pageFile // two-page checkpoint files, rewritten in place by Save
}

// pageFile is an open two-page checkpoint file and which page holds its
// newest record.
type pageFile struct {
	f      faultfs.File
	newest int    // 0 or 1
	gen    uint64 // the newest record's generation
}

// Open creates dir if needed and takes its single-owner lock. It removes
// temporary files left by a Save that was interrupted by a crash. Close
// releases the lock. A nil log discards.
func Open(dir string, log *slog.Logger) (*Dir, error) {
	return OpenFS(faultfs.OS, dir, log)
}

// OpenFS is Open with the checkpoint files written through fsys, so that
// tests can cut the power under the store. The lock file and reads do not
// go through fsys.
func OpenFS(fsys FS, dir string, log *slog.Logger) (*Dir, error) {
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
	d := &Dir{path: dir, fs: fsys, log: log, lock: lock, open: make(map[string]*pageFile)}
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
	for name, pf := range d.open {
		pf.f.Close()
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
	r, err := d.read(pipeline)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cp := r.Checkpoint()
	return &cp, nil
}

// pageSize is the size of one page of a checkpoint file. In the steady
// state the file is two pages, each holding one record padded with spaces,
// so that either can be rewritten in place.
const pageSize = 4096

// Save replaces the pipeline's checkpoint atomically and durably: after a
// crash of the process or a power cut at any point, Load returns this
// checkpoint or the previous one.
//
// A record that fits in a page is written in place over the older of the
// file's two pages, and the file is fdatasynced. The newer page, holding
// the previous checkpoint, is not touched, so a write torn by a power cut
// damages only the page being written, and Load falls back to the other.
// The file's size does not change, so the sync flushes one data page and
// no metadata: this is several times cheaper than a rename and a directory
// sync, and Save runs once per batch. The first Save of a pipeline that
// has no two-page file yet, and a record larger than a page, go the slow
// way: a temporary file, fsync, rename, fsync of the directory. A file an
// earlier process left is reopened and saved into in place.
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
	d.mu.Lock()
	defer d.mu.Unlock()
	pf := d.open[pipeline]
	if pf == nil {
		pf = d.reopenLocked(pipeline)
	}
	var gen uint64
	if pf != nil {
		gen = pf.gen + 1
	} else if r, err := d.read(pipeline); err == nil {
		gen = r.Generation + 1
	} else {
		gen = 1 // none, or a damaged one that this save replaces
	}
	b, err := encodeGeneration(pipeline, gen, cp, time.Now())
	if err != nil {
		return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
	}
	if len(b) <= pageSize && pf != nil {
		older := 1 - pf.newest
		if err := d.writePageLocked(pf, older, padPage(b)); err != nil {
			pf.f.Close()
			delete(d.open, pipeline) // the next Save rewrites the file whole
			return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
		}
		pf.newest, pf.gen = older, gen
		return nil
	}
	content, pages := b, false
	if len(b) <= pageSize {
		// Page 0 holds the record; page 1 none yet, so the first
		// in-place Save writes there.
		content, pages = append(padPage(b), blankPage()...), true
	}
	if err := d.replaceLocked(pipeline, content, pages, gen); err != nil {
		return fmt.Errorf("save checkpoint of %s: %w", pipeline, err)
	}
	return nil
}

// reopenLocked opens the pipeline's file for in-place saves if it is a
// two-page file with a valid page, as a store of an earlier process left
// it, so that the first save after a restart is one page and a flush
// rather than a rename and two. It returns nil if the file is missing or
// not in that shape: the caller then takes the slow path.
func (d *Dir) reopenLocked(pipeline string) *pageFile {
	path := File(d.path, pipeline)
	f, err := d.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	b := make([]byte, 2*pageSize+1) // one byte more, to see a longer file
	n, err := f.ReadAt(b, 0)
	if n != 2*pageSize || err != io.EOF {
		f.Close()
		return nil
	}
	r, newest, _, err := decodePages(path, pipeline, b[:n])
	if err != nil {
		f.Close()
		return nil
	}
	pf := &pageFile{f: f, newest: newest, gen: r.Generation}
	d.open[pipeline] = pf
	return pf
}

func (d *Dir) writePageLocked(pf *pageFile, page int, b []byte) error {
	if _, err := pf.f.WriteAt(b, int64(page)*pageSize); err != nil {
		return err
	}
	return fdatasync(pf.f)
}

// padPage pads a record (which ends in a newline, and is at most a page)
// with spaces to exactly one page, ending in a newline. JSON ignores the padding; any damage to it
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

// blankPage is a page that holds no record: spaces and a newline.
func blankPage() []byte { return padPage([]byte("\n")) }

// replaceLocked replaces the pipeline's file with content b the slow,
// always-atomic way, and keeps the new file open for in-place saves if it
// is a two-page file whose page 0 holds generation gen.
func (d *Dir) replaceLocked(pipeline string, b []byte, pages bool, gen uint64) error {
	if pf := d.open[pipeline]; pf != nil {
		pf.f.Close()
		delete(d.open, pipeline)
	}
	path := File(d.path, pipeline)
	tmp := path + tempInfix + strconv.FormatUint(rand.Uint64(), 36)
	f, err := d.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer d.fs.Remove(tmp) // fails harmlessly once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := d.fs.Rename(tmp, path); err != nil {
		f.Close()
		return err
	}
	// The rename is durable only once the directory is.
	if err := d.fs.SyncDir(d.path); err != nil {
		f.Close()
		return fmt.Errorf("sync directory %s: %w", d.path, err)
	}
	if !pages {
		return f.Close()
	}
	d.open[pipeline] = &pageFile{f: f, newest: 0, gen: gen} // the descriptor now names path
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
	if pf := d.open[pipeline]; pf != nil {
		pf.f.Close()
		delete(d.open, pipeline)
	}
	d.mu.Unlock()
	err := d.fs.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset checkpoint: %w", err)
	}
	if err := d.fs.SyncDir(d.path); err != nil {
		return fmt.Errorf("reset checkpoint: sync directory %s: %w", d.path, err)
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
// read or trusted is a *CorruptError. Of a two-page file it returns the
// newest valid page.
func Read(dir, pipeline string) (*Record, error) {
	if err := checkName(pipeline); err != nil {
		return nil, err
	}
	r, _, err := readFile(File(dir, pipeline), pipeline)
	return r, err
}

// read is Read, logging a damaged page that the other page replaces.
func (d *Dir) read(pipeline string) (*Record, error) {
	path := File(d.path, pipeline)
	r, damaged, err := readFile(path, pipeline)
	if damaged != nil {
		d.log.Warn("checkpoint page is damaged, probably by a write torn by a power cut; using the other page, the previous checkpoint",
			"pipeline", pipeline, "path", path, "err", damaged)
	}
	return r, err
}

// readFile reads and verifies a checkpoint file: one record (the format
// of earlier versions, and of a record larger than a page) or two pages.
// damaged is the problem of a page that was skipped for the other.
func readFile(path, pipeline string) (r *Record, damaged, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read checkpoint: %w", err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, nil, permissionError(path, err)
	}
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error() // the path is in the message already
		}
		return nil, nil, &CorruptError{Path: path, Reason: reason, Err: err}
	}
	if len(b) != 2*pageSize {
		r, err := decodeRecord(path, pipeline, b)
		if err == nil && r.Generation != 0 && len(b) == pageSize {
			// Only a two-page file has padded records with a generation.
			return nil, nil, &CorruptError{Path: path, Reason: "truncated: one page of a two-page checkpoint file"}
		}
		return r, nil, err
	}
	r, _, damaged, err = decodePages(path, pipeline, b)
	return r, damaged, err
}

// decodePages decodes the two pages of a checkpoint file and returns the
// newer valid record and its page (0 or 1); damaged is the problem of a
// page that was skipped for the other.
func decodePages(path, pipeline string, b []byte) (r *Record, page int, damaged, err error) {
	var recs [2]*Record
	var errs [2]error
	for i := range recs {
		pg := b[i*pageSize : (i+1)*pageSize]
		if bytes.Equal(pg, blankPage()) {
			errs[i] = errors.New("never written")
			continue
		}
		recs[i], errs[i] = decodeRecord(path, pipeline, pg)
	}
	switch {
	case recs[0] != nil && recs[1] != nil:
		if recs[1].Generation > recs[0].Generation {
			return recs[1], 1, nil, nil
		}
		return recs[0], 0, nil, nil
	case recs[0] != nil:
		return recs[0], 0, pageDamage(errs[1], 2), nil
	case recs[1] != nil:
		return recs[1], 1, pageDamage(errs[0], 1), nil
	}
	return nil, 0, nil, &CorruptError{Path: path, Reason: fmt.Sprintf("both pages are damaged: page 1: %s; page 2: %s", reasonOf(errs[0]), reasonOf(errs[1]))}
}

// pageDamage is nil for a page that was never written: it was not damaged.
func pageDamage(err error, page int) error {
	var ce *CorruptError
	if !errors.As(err, &ce) {
		return nil
	}
	return fmt.Errorf("page %d: %s", page, ce.Reason)
}

func reasonOf(err error) string {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
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
		if err := d.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
