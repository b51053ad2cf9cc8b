// Package file is a sink that appends records to a JSON-lines file,
// exactly once.
//
// Each record is one line: its encoded data and a newline. Commit flushes
// and fsyncs the file, and the sink's state in the checkpoint is the file's
// committed length, {"committed_bytes": N}. On restart, Open truncates the
// file to that length, removing a torn line or records written after the
// last checkpoint, which the source then sends again. So a crash leaves
// neither a partial line nor a duplicate.
//
// A fresh pipeline (no sink state in its checkpoint) refuses to write into
// a file that is not empty: it cannot tell which of its lines came from
// where, and appending would duplicate or interleave events. Move or delete
// the file, or point the sink at another path. A file shorter than its
// committed length means data the checkpoint recorded as durable is gone;
// Open refuses that too, rather than write a file with a hole.
//
// The file has one writer: Open takes a lock beside it, held until Close,
// and refuses a second sink on the path, naming the pipeline and PID that
// hold it. The state also holds CRC-32C checksums of the first and last
// 4 KiB of the committed bytes, and Open refuses a file whose ends no
// longer match: something else rewrote or truncated it (logrotate's
// copytruncate leaves NUL bytes at its start).
//
// # One file per namespace
//
// A path holding {db} or {coll}, such as out/{db}/{coll}.jsonl, is a
// template: each namespace ("db.coll") goes to its own file, created with
// its directories on first use. The state then records every file's
// committed length and checksums, {"files": {"shop/orders.jsonl": [N,
// head_bytes, head_crc32c, tail_bytes, tail_crc32c]}}, keyed by the path
// under the template's root (the directory before the first
// placeholder), and Open cuts each file back to its length. A file made
// after the last checkpoint carries a marker naming the pipeline until a
// checkpoint names it; Open removes such a file. One lock, .tide-lock in
// the root, guards the whole template. Namespace parts are escaped
// (percent-encoding '/', '\', '%', ':', control bytes and a leading '.'),
// so that no namespace names a file outside the root.
//
// A file or directory name longer than the file system allows (NAME_MAX,
// at most 255 bytes, less the 9 of ".tide-new" for a file), or a path
// longer than PATH_MAX, is shortened: the name keeps the template's text
// before and after its placeholders (".jsonl"), and of the rest its
// start, cut where no UTF-8 sequence or %XX escape is split, followed by
// "~" and 16 hex digits of the SHA-256 of the whole name. The same
// namespace gets the same name on every run and machine, and names that
// fit are left as they are. The state records each shortened file under
// its namespace, {"files": {...}, "shortened": {"db.coll": "db/c…~hash.jsonl"}},
// and a restart writes that file whatever the rule would give then; the
// sink logs the name once, when it makes it.
package file

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// bufferSize is the write buffer: large enough that a batch of small
// records becomes a few large writes.
const bufferSize = 1 << 20

// Config configures a file sink. Its yaml tags are the sink.file section
// of a pipeline file.
type Config struct {
	// Path is the JSON-lines file; parent directories are created. It
	// may hold {db} and {coll}: one file per namespace; and {route}: one
	// file per route a route transform gives.
	Path string `yaml:"path"`

	// Pipeline and DataDir name the pipeline that owns the file. A
	// second sink on the same path is refused, naming them, and so is a
	// file that another pipeline began before its first checkpoint.
	Pipeline string `yaml:"-"`
	DataDir  string `yaml:"-"`

	Logger *slog.Logger `yaml:"-"` // nil discards
	FS     FS           `yaml:"-"` // writes the file; nil is the real file system (tests cut the power under the sink)
}

// DefaultConfig returns the defaults of a pipeline file's sink.file
// section: it has none but the path, which is required.
func DefaultConfig() Config { return Config{} }

// Validate reports the problems of c's YAML fields, or nil. Each error
// starts with the key it is about; package config prefixes the section's
// path and line.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Path) == "" {
		return errors.New("path: required")
	}
	if strings.HasSuffix(c.Path, "/") {
		return fmt.Errorf("path: %q is a directory; name a file", c.Path)
	}
	if _, err := parseTemplate(c.Path); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	return nil
}

// Sink appends records to a JSON-lines file, or to one file per namespace.
// Put and Commit are called from one goroutine, as cdc.Sink requires.
type Sink struct {
	path  string
	tmpl  *template // nil without placeholders: one file
	log   *slog.Logger
	owner owner // DataDir made absolute by Open
	fs    faultfs.FS

	lockFile *os.File // holds the lock from Open to Close
	isOpen   bool

	single *target // the file, without placeholders

	// With a template: every file known, by its path under the root.
	files   map[string]*target
	keys    []string           // of files, sorted, for State
	byNS    map[string]*target // namespace -> its file, once resolved
	short   map[string]*target // namespace -> its file, for each file whose name was shortened (shortenPath)
	open    list.List          // open targets, most recently used first
	maxOpen int                // bound on open files
	dirty   []*target          // written since the last Commit

	mu      sync.Mutex         // guards the field below
	pending map[string]*target // fresh-file markers waiting for a checkpoint naming their file, by key

	marked atomic.Bool // the single file's fresh-file marker exists; cleared by CheckpointSaved, from the runtime's saver
}

// target is one output file.
type target struct {
	path string // as the sink opens it
	key  string // its path under the template's root; "" for the single file
	ns   string // its namespace, if its name was shortened

	f         faultfs.File // nil while closed
	w         *bufio.Writer
	elem      *list.Element // in Sink.open while open
	ends      ends          // valid while open
	sums      checksums     // of the first written bytes, while closed
	written   int64         // bytes put so far, committed or not
	committed int64         // bytes made durable by the last Commit
	isDirty   bool          // in Sink.dirty
}

// DefaultMaxOpen bounds the files a templated sink holds open; the least
// recently used is closed (after an fsync, if written) to open another.
const DefaultMaxOpen = 256

// templateBufferSize is each file's write buffer with a template: many
// files may be open at once (at most 64 MiB of buffers for DefaultMaxOpen
// files). At 64 KiB, the writes of a catch-up over ten files cost a
// database-level pipeline a third more CPU than ten pipelines with one
// file each (cmd/tide BenchmarkCatchUpOneVsTenPipelines).
const templateBufferSize = 256 << 10

// New returns a sink writing to cfg.Path. It does no I/O until Open.
func New(cfg Config) *Sink {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fsys := cfg.FS
	if fsys == nil {
		fsys = faultfs.OS
	}
	tmpl, _ := parseTemplate(cfg.Path) // an invalid template is refused by Open
	return &Sink{
		path:    cfg.Path,
		tmpl:    tmpl,
		log:     log.With("sink", "file", "path", cfg.Path),
		owner:   owner{Pipeline: cfg.Pipeline, DataDir: cfg.DataDir},
		fs:      fsys,
		maxOpen: DefaultMaxOpen,
	}
}

// state is the single file's part of the checkpoint.
type state struct {
	CommittedBytes *int64 `json:"committed_bytes"`

	// CRC-32C of the committed file's first and last bytes; absent in
	// checkpoints written before the sink recorded them.
	HeadBytes  *int64  `json:"head_bytes"`
	HeadCRC32C *uint32 `json:"head_crc32c"`
	TailBytes  *int64  `json:"tail_bytes"`
	TailCRC32C *uint32 `json:"tail_crc32c"`
}

// Open takes the lock, opens or creates the file, checks that its
// committed bytes are the ones this pipeline wrote, and cuts it back to
// the length committed in restored, if any. With a template it does so
// for every file the checkpoint names, and removes the files this
// pipeline created after its last checkpoint.
func (s *Sink) Open(ctx context.Context, restored *cdc.Checkpoint) error {
	if s.path == "" {
		return errors.New("file sink: no path configured")
	}
	if s.isOpen {
		return fmt.Errorf("file sink %s: already open", s.path)
	}
	s.single, s.files, s.keys, s.byNS, s.dirty = nil, nil, nil, nil, nil
	if _, err := parseTemplate(s.path); err != nil {
		return fmt.Errorf("file sink: path: %w", err)
	}
	o, err := ownerOf(s.owner.Pipeline, s.owner.DataDir)
	if err != nil {
		return err
	}
	s.owner = o
	lockPath := s.path + lockSuffix
	if s.tmpl != nil {
		lockPath = filepath.Join(s.tmpl.root, lockSuffix)
	}
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return fmt.Errorf("file sink: create directory: %w", err)
	}
	lock, err := s.lock(lockPath)
	if err != nil {
		return err
	}
	if s.tmpl != nil {
		s.tmpl.nameMax = fsNameMax(s.tmpl.root)
	}
	if s.tmpl != nil {
		err = s.openTemplate(ctx, restored)
	} else {
		err = s.openSingle(ctx, restored)
	}
	if err != nil {
		s.closeFiles()
		lock.Close()
		return err
	}
	s.lockFile = lock
	s.isOpen = true
	return nil
}

// openSingle is Open, under the lock, of a path without placeholders.
func (s *Sink) openSingle(_ context.Context, restored *cdc.Checkpoint) error {
	committed, sums, restoring, err := restoredLength(restored)
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	t := &target{path: s.path}
	fresh, err := s.openFile(t, committed, sums, restoring)
	if err != nil {
		return err
	}
	s.marked.Store(fresh)
	s.single = t
	return nil
}

// openFile opens (creating it) t's file for appending at committed,
// after claim, verifyEnds and restore. It reports whether the file has a
// fresh-file marker that a checkpoint must clear.
func (s *Sink) openFile(t *target, committed int64, sums *checksums, restoring bool) (bool, error) {
	if err := s.mkdirAll(filepath.Dir(t.path)); err != nil {
		return false, err
	}
	_, statErr := os.Stat(t.path)
	f, err := s.fs.OpenFile(t.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("file sink: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new file's name must be durable before a checkpoint counts
		// bytes in it.
		if err := s.fs.SyncDir(filepath.Dir(t.path)); err != nil {
			f.Close()
			return false, fmt.Errorf("file sink: sync directory: %w", err)
		}
	}
	fresh, err := s.claim(t, f, restoring)
	if err != nil {
		f.Close()
		return false, err
	}
	if err := s.verifyEnds(t, f, committed, sums); err != nil {
		f.Close()
		return false, err
	}
	if err := s.restore(t, f, committed, restoring); err != nil {
		f.Close()
		return false, err
	}
	if _, err := f.Seek(committed, io.SeekStart); err != nil {
		f.Close()
		return false, fmt.Errorf("file sink: %w", err)
	}
	size := bufferSize
	if s.tmpl != nil {
		size = templateBufferSize
	}
	t.f = f
	t.w = bufio.NewWriterSize(f, size)
	t.written, t.committed = committed, committed
	return fresh, nil
}

// mkdirAll creates dir and its missing parents, syncing each new
// directory's parent so that the new entries survive a power cut.
func (s *Sink) mkdirAll(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return fmt.Errorf("file sink: create directory: %w", err)
	}
	if err := s.fs.SyncDir(parent); err != nil {
		return fmt.Errorf("file sink: sync directory: %w", err)
	}
	return nil
}

// freshSuffix names the marker that says the file belongs to a pipeline
// that has not saved a checkpoint naming the file yet.
const freshSuffix = ".tide-new"

// claim handles a file the checkpoint does not name. A crash between the
// first commit and the first checkpoint save leaves a non-empty file and
// no checkpoint; the marker, written before anything goes into the file,
// tells that case (the pipeline's own uncommitted bytes, cut on restart)
// from a file that was there before (refused by restore). Once a
// checkpoint names the file, the marker is removed: by CheckpointSaved
// during the run, or by the next Open. It reports whether it left a
// marker.
func (s *Sink) claim(t *target, f faultfs.File, restoring bool) (bool, error) {
	marker := t.path + freshSuffix
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("file sink: %w", err)
	}
	ours, err := s.checkMarker(t.path, marker, fi.Size())
	if err != nil {
		return false, err
	}
	if restoring {
		if err := s.fs.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("file sink: %w", err)
		}
		return false, nil
	}
	if fi.Size() > 0 {
		if !ours {
			return false, nil // not ours: restore refuses it
		}
		s.log.Warn("file sink: cutting the bytes a crashed run wrote before a checkpoint named the file",
			"path", t.path, "bytes", fi.Size())
		if err := f.Truncate(0); err != nil {
			return false, fmt.Errorf("file sink: truncate uncommitted first run: %w", err)
		}
		return true, f.Sync()
	}
	if err := s.writeMarker(t.path, marker); err != nil {
		return false, err
	}
	return true, s.fs.SyncDir(filepath.Dir(t.path))
}

// CheckpointSaved removes the fresh-file markers of the files cp names:
// from then on a restart restores them from the checkpoint, and a
// non-empty file without one is somebody else's.
func (s *Sink) CheckpointSaved(cp cdc.Checkpoint) {
	if s.tmpl == nil {
		if s.marked.Swap(false) {
			if err := s.fs.Remove(s.path + freshSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.log.Warn("file sink: remove fresh-file marker", "err", err)
			}
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return
	}
	// A checkpoint saved late may predate a file's first use: only the
	// files it names lose their marker.
	named, err := stateKeys(cp.Sink)
	if err != nil {
		s.log.Warn("file sink: saved checkpoint has no file state", "err", err)
		return
	}
	for key, t := range s.pending {
		if _, ok := named[key]; !ok {
			continue
		}
		if err := s.fs.Remove(t.path + freshSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("file sink: remove fresh-file marker", "path", t.path, "err", err)
			continue
		}
		delete(s.pending, key)
	}
}

// restoredLength returns the committed length from restored's sink state,
// its checksums (nil in an older state without them), and whether there
// was one.
func restoredLength(restored *cdc.Checkpoint) (int64, *checksums, bool, error) {
	if restored == nil || len(restored.Sink) == 0 {
		return 0, nil, false, nil
	}
	var st state
	dec := json.NewDecoder(bytes.NewReader(restored.Sink))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.CommittedBytes == nil || *st.CommittedBytes < 0 {
		if isTemplateState(restored.Sink) {
			return 0, nil, false, fmt.Errorf(`checkpoint sink state holds one file per namespace, but the path has no {db} or {coll}: ` +
				`put the placeholders back, or reset the checkpoint to start over`)
		}
		return 0, nil, false, fmt.Errorf(`checkpoint sink state %.100q is not {"committed_bytes": N}: it was not written by a file sink`, restored.Sink)
	}
	sums, err := checksumsOf(st)
	if err != nil {
		return 0, nil, false, fmt.Errorf("checkpoint sink state %.100q %w", restored.Sink, err)
	}
	return *st.CommittedBytes, sums, true, nil
}

// restore checks the file's length against the checkpoint and truncates
// what was written after the last commit.
func (s *Sink) restore(t *target, f faultfs.File, committed int64, restoring bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	size := fi.Size()
	switch {
	case !restoring && size > 0:
		return fmt.Errorf("file sink %s already holds %d bytes but the pipeline has no file checkpoint for it: "+
			"appending would duplicate or mix events; move or delete the file, or set another sink.file.path", t.path, size)
	case size < committed:
		return fmt.Errorf("file sink %s is %d bytes but the checkpoint says %d bytes were committed: "+
			"data recorded as durable is missing; restore the file, or reset the checkpoint and remove the file to start over",
			t.path, size, committed)
	case size > committed:
		if err := f.Truncate(committed); err != nil {
			return fmt.Errorf("file sink: truncate uncommitted tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.log.Info("truncated uncommitted tail", "file", t.path, "committed_bytes", committed, "removed_bytes", size-committed)
	}
	return nil
}

// Put appends one line per record to the write buffer of its file.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	if !s.isOpen {
		return fmt.Errorf("file sink %s: not open", s.path)
	}
	for i := 0; i < len(batch); {
		t := s.single
		if t == nil {
			var err error
			if t, err = s.resolve(&batch[i]); err != nil {
				return err
			}
		}
		// The run of records for the same file.
		j := i + 1
		for s.single == nil && j < len(batch) && batch[j].Namespace == batch[i].Namespace && batch[j].Route == batch[i].Route {
			j++
		}
		if err := s.put(t, batch[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// put appends run, records of one file, to t.
func (s *Sink) put(t *target, run []cdc.Record) error {
	if !t.isDirty {
		t.isDirty = true
		s.dirty = append(s.dirty, t)
	}
	done := 0 // records in the buffer, for State's checksums
	defer func() { t.ends.wrote(run[:done]) }()
	for i := range run {
		r := &run[i]
		if bytes.IndexByte(r.Data, '\n') >= 0 {
			return fmt.Errorf("file sink %s: record at position %s contains a newline, which would split its line", t.path, r.Pos)
		}
		t.w.Write(r.Data) // a write error sticks to w; Flush in Commit reports it
		if err := t.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		t.written += int64(len(r.Data)) + 1
		done = i + 1
	}
	return nil
}

// State returns the sink's part of the next checkpoint. For one file it
// is {"committed_bytes": N, ...}, N counting every record put so far: the
// length the file will have once the pending Commit returns, and the
// other fields are CRC-32C checksums of the first and last up to 4 KiB of
// those N bytes, which the next Open verifies. With a template it holds
// the same for every file: {"files": {key: [N, head_bytes, head_crc32c,
// tail_bytes, tail_crc32c]}}, and, if some file names were shortened to
// fit the file system, "shortened": {namespace: key}.
func (s *Sink) State() []byte {
	if s.tmpl != nil {
		return s.templateState()
	}
	t := s.single
	if t == nil {
		t = &target{}
	}
	b := make([]byte, 0, 160)
	b = append(b, `{"committed_bytes":`...)
	b = strconv.AppendInt(b, t.written, 10)
	b = t.ends.sums().appendState(b)
	return append(b, '}')
}

// Commit flushes the buffers and fsyncs every file written since the last
// Commit, several at a time.
func (s *Sink) Commit(ctx context.Context, _ cdc.Checkpoint) error {
	if !s.isOpen {
		return fmt.Errorf("file sink %s: not open", s.path)
	}
	var err error
	if len(s.dirty) == 1 {
		err = s.syncTarget(s.dirty[0])
	} else if len(s.dirty) > 1 {
		g, _ := errgroup.WithContext(ctx)
		g.SetLimit(syncParallelism)
		for _, t := range s.dirty {
			g.Go(func() error { return s.syncTarget(t) })
		}
		err = g.Wait()
	}
	if err != nil {
		return err
	}
	for _, t := range s.dirty {
		t.committed = t.written
		t.isDirty = false
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	return nil
}

// syncParallelism is how many files Commit fsyncs at once: fsyncs of
// different files overlap in the device's queue.
const syncParallelism = 8

// syncTarget flushes and fsyncs t, if open; a closed one was synced when
// it was closed.
func (s *Sink) syncTarget(t *target) error {
	if t.f == nil || t.written == t.committed {
		return nil
	}
	if err := t.w.Flush(); err != nil {
		return fmt.Errorf("file sink: write: %w", err) // the *PathError names the file
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// Close closes the files, then releases the lock. Records put after the
// last Commit are dropped: they were never committed, and the next run
// truncates to the committed length anyway.
func (s *Sink) Close() error {
	if !s.isOpen {
		return nil
	}
	s.isOpen = false
	err := s.closeFiles()
	if lerr := s.lockFile.Close(); lerr != nil && err == nil { // closing the descriptor releases the flock
		err = lerr
	}
	s.lockFile = nil
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// closeFiles closes every open file without flushing.
func (s *Sink) closeFiles() error {
	var errs []error
	if t := s.single; t != nil && t.f != nil {
		errs = append(errs, t.f.Close())
		t.f, t.w = nil, nil
	}
	for e := s.open.Front(); e != nil; e = e.Next() {
		t := e.Value.(*target)
		t.sums = t.ends.sums() // for a State after Close
		errs = append(errs, t.f.Close())
		t.f, t.w, t.elem = nil, nil, nil
	}
	s.open.Init()
	return errors.Join(errs...)
}
