// Package stdout is a sink that writes records as JSON lines to standard
// output, or any io.Writer. It is at-least-once: a batch reaches the
// writer only on Commit, in one write, and after a crash the records since
// the last checkpoint are written again.
package stdout

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tide-cdc/tide/cdc"
)

// Config configures a stdout sink. It has no YAML keys: "stdout: {}"
// selects it.
type Config struct {
	Writer io.Writer `yaml:"-"` // nil means os.Stdout
}

// DefaultConfig returns the defaults of a pipeline file's sink.stdout
// section: it has no keys; "stdout: {}" selects the sink.
func DefaultConfig() Config { return Config{} }

// Validate reports the problems of c: there are none to find.
func (Config) Validate() error { return nil }

// Sink writes one line per record. Put and Commit are called from one
// goroutine, as cdc.Sink requires.
type Sink struct {
	w   io.Writer
	buf bytes.Buffer // the lines put since the last Commit
}

// New returns a sink writing to cfg.Writer.
func New(cfg Config) *Sink {
	w := cfg.Writer
	if w == nil {
		w = os.Stdout
	}
	return &Sink{w: w}
}

// Open does nothing: standard output has no state to restore.
func (s *Sink) Open(context.Context, *cdc.Checkpoint) error { return nil }

// Put buffers one line per record. Nothing reaches the writer before
// Commit, however large the batch; the pipeline bounds a batch in bytes.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	for i := range batch {
		s.buf.Write(batch[i].Data)
		s.buf.WriteByte('\n')
	}
	return nil
}

// Commit writes the buffered lines to the writer.
func (s *Sink) Commit(context.Context, cdc.Checkpoint) error {
	if s.buf.Len() == 0 {
		return nil
	}
	_, err := s.buf.WriteTo(s.w)
	s.buf.Reset() // on error too: the pipeline stops, and the batch is read again
	if err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	return nil
}

// Close drops lines put since the last Commit; it does not close the
// writer, which the sink does not own.
func (s *Sink) Close() error {
	s.buf.Reset()
	return nil
}
