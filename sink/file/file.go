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
package file

import (
	"bufio"
	"bytes"
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
	"sync/atomic"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/faultfs"
)

// bufferSize is the write buffer: large enough that a batch of small
// records becomes a few large writes.
const bufferSize = 1 << 20

// Config configures a file sink. Its yaml tags are the sink.file section
// of a pipeline file.
type Config struct {
	Path string `yaml:"path"` // the JSON-lines file; parent directories are created

	// Pipeline and DataDir name the pipeline that owns the file. A
	// second sink on the same path is refused, naming them, and so is a
	// file that another pipeline began before its first checkpoint.
	Pipeline string `yaml:"-"`
	DataDir  string `yaml:"-"`

	Logger *slog.Logger `yaml:"-"` // nil discards
	FS     faultfs.FS   `yaml:"-"` // writes the file; nil is the real file system (tests cut the power with a *faultfs.Disk)
}

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
	return nil
}

// Sink appends records to a JSON-lines file. Put and Commit are called from
// one goroutine, as cdc.Sink requires.
type Sink struct {
	path  string
	log   *slog.Logger
	owner owner // DataDir made absolute by Open

	lockFile *os.File // holds the file's lock from Open to Close
	ends     ends     // the file's first and last bytes, for State's checksums
	fs       faultfs.FS

	f         faultfs.File
	w         *bufio.Writer
	written   int64 // bytes put so far, committed or not
	committed int64 // bytes made durable by the last Commit

	marked atomic.Bool // the fresh-file marker exists; cleared by CheckpointSaved, from the runtime's saver
}

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
	return &Sink{
		path:  cfg.Path,
		log:   log.With("sink", "file", "path", cfg.Path),
		owner: owner{Pipeline: cfg.Pipeline, DataDir: cfg.DataDir},
		fs:    fsys,
	}
}

// state is the sink's part of the checkpoint.
type state struct {
	CommittedBytes *int64 `json:"committed_bytes"`

	// CRC-32C of the committed file's first and last bytes; absent in
	// checkpoints written before the sink recorded them.
	HeadBytes  *int64  `json:"head_bytes"`
	HeadCRC32C *uint32 `json:"head_crc32c"`
	TailBytes  *int64  `json:"tail_bytes"`
	TailCRC32C *uint32 `json:"tail_crc32c"`
}

// Open takes the file's lock, opens or creates the file, checks that its
// committed bytes are the ones this pipeline wrote, and cuts it back to
// the length committed in restored, if any.
func (s *Sink) Open(ctx context.Context, restored *cdc.Checkpoint) error {
	if s.path == "" || s.f != nil {
		return s.open(ctx, restored) // refuses before touching anything
	}
	o, err := ownerOf(s.owner.Pipeline, s.owner.DataDir)
	if err != nil {
		return err
	}
	s.owner = o
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("file sink: create directory: %w", err)
	}
	lock, err := s.lock()
	if err != nil {
		return err
	}
	if err := s.open(ctx, restored); err != nil {
		lock.Close()
		return err
	}
	s.lockFile = lock
	return nil
}

// open is Open under the file's lock.
func (s *Sink) open(_ context.Context, restored *cdc.Checkpoint) error {
	if s.path == "" {
		return errors.New("file sink: no path configured")
	}
	if s.f != nil {
		return fmt.Errorf("file sink %s: already open", s.path)
	}
	committed, sums, restoring, err := restoredLength(restored)
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return fmt.Errorf("file sink: create directory: %w", err)
	}
	_, statErr := os.Stat(s.path)
	f, err := s.fs.OpenFile(s.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new file's name must be durable before a checkpoint counts
		// bytes in it.
		if err := s.fs.SyncDir(filepath.Dir(s.path)); err != nil {
			f.Close()
			return fmt.Errorf("file sink: sync directory: %w", err)
		}
	}
	if err := s.claim(f, restoring); err != nil {
		f.Close()
		return err
	}
	if err := s.verifyEnds(f, committed, sums); err != nil {
		f.Close()
		return err
	}
	if err := s.restore(f, committed, restoring); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(committed, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("file sink: %w", err)
	}
	s.f = f
	s.w = bufio.NewWriterSize(f, bufferSize)
	s.written, s.committed = committed, committed
	return nil
}

// freshSuffix names the marker that says the file belongs to a pipeline
// that has not saved its first checkpoint yet.
const freshSuffix = ".tide-new"

// claim handles a start with no file checkpoint. A crash between the first
// commit and the first checkpoint save leaves a non-empty file and no
// checkpoint; the marker, written before anything goes into the file,
// tells that case (the pipeline's own uncommitted bytes, cut on restart)
// from a file that was there before (refused by restore). Once a
// checkpoint names the file, the marker is removed: by CheckpointSaved
// during the run, or by the next Open.
func (s *Sink) claim(f faultfs.File, restoring bool) error {
	marker := s.path + freshSuffix
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	ours, err := s.checkMarker(marker, fi.Size())
	if err != nil {
		return err
	}
	if restoring {
		if err := s.fs.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: %w", err)
		}
		return nil
	}
	if fi.Size() > 0 {
		if !ours {
			return nil // not ours: restore refuses it
		}
		s.log.Warn("file sink: cutting the bytes a crashed first run wrote before its first checkpoint",
			"path", s.path, "bytes", fi.Size())
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("file sink: truncate uncommitted first run: %w", err)
		}
		s.marked.Store(true)
		return f.Sync()
	}
	s.marked.Store(true)
	if err := s.writeMarker(marker); err != nil {
		return err
	}
	return s.fs.SyncDir(filepath.Dir(s.path))
}

// CheckpointSaved removes the fresh-file marker once a checkpoint names the
// file: from then on a restart restores from the checkpoint, and a
// non-empty file without one is somebody else's.
func (s *Sink) CheckpointSaved(cdc.Checkpoint) {
	if s.marked.Swap(false) {
		if err := s.fs.Remove(s.path + freshSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("file sink: remove fresh-file marker", "err", err)
		}
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
func (s *Sink) restore(f faultfs.File, committed int64, restoring bool) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	size := fi.Size()
	switch {
	case !restoring && size > 0:
		return fmt.Errorf("file sink %s already holds %d bytes but the pipeline has no file checkpoint for it: "+
			"appending would duplicate or mix events; move or delete the file, or set another sink.file.path", s.path, size)
	case size < committed:
		return fmt.Errorf("file sink %s is %d bytes but the checkpoint says %d bytes were committed: "+
			"data recorded as durable is missing; restore the file, or reset the checkpoint and remove the file to start over",
			s.path, size, committed)
	case size > committed:
		if err := f.Truncate(committed); err != nil {
			return fmt.Errorf("file sink: truncate uncommitted tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.log.Info("truncated uncommitted tail", "committed_bytes", committed, "removed_bytes", size-committed)
	}
	return nil
}

// Put appends one line per record to the write buffer.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	if s.w == nil {
		return fmt.Errorf("file sink %s: not open", s.path)
	}
	done := 0 // records in the buffer, for State's checksums
	defer func() { s.ends.wrote(batch[:done]) }()
	for i := range batch {
		r := &batch[i]
		if bytes.IndexByte(r.Data, '\n') >= 0 {
			return fmt.Errorf("file sink %s: record at position %s contains a newline, which would split its line", s.path, r.Pos)
		}
		s.w.Write(r.Data) // a write error sticks to w; Flush in Commit reports it
		if err := s.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.written += int64(len(r.Data)) + 1
		done = i + 1
	}
	return nil
}

// State returns {"committed_bytes": N, ...}, N counting every record put
// so far: the length the file will have once the pending Commit returns.
// The other fields are CRC-32C checksums of the first and last up to 4 KiB
// of those N bytes, which the next Open verifies.
func (s *Sink) State() []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"committed_bytes":`...)
	b = strconv.AppendInt(b, s.written, 10)
	b = s.ends.sums().appendState(b)
	return append(b, '}')
}

// Commit flushes the buffer and fsyncs the file.
func (s *Sink) Commit(_ context.Context, _ cdc.Checkpoint) error {
	if s.w == nil {
		return fmt.Errorf("file sink %s: not open", s.path)
	}
	if s.written == s.committed {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("file sink: write: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	s.committed = s.written
	return nil
}

// Close closes the file, then releases its lock. Records put after the
// last Commit are dropped: they were never committed, and the next run
// truncates to the committed length anyway.
func (s *Sink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f, s.w = nil, nil
	if lerr := s.lockFile.Close(); lerr != nil && err == nil { // closing the descriptor releases the flock
		err = lerr
	}
	s.lockFile = nil
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}
