// Package stdout is a sink that writes records as JSON lines to standard
// output, or any io.Writer. It is at-least-once: output is flushed on
// Commit, and after a crash the records since the last checkpoint are
// written again.
package stdout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tide-cdc/tide/cdc"
)

const bufferSize = 64 << 10

// Config configures a stdout sink.
type Config struct {
	Writer io.Writer // nil means os.Stdout
}

// Sink writes one line per record. Put and Commit are called from one
// goroutine, as cdc.Sink requires.
type Sink struct {
	w *bufio.Writer
}

// New returns a sink writing to cfg.Writer.
func New(cfg Config) *Sink {
	w := cfg.Writer
	if w == nil {
		w = os.Stdout
	}
	return &Sink{w: bufio.NewWriterSize(w, bufferSize)}
}

// Open does nothing: standard output has no state to restore.
func (s *Sink) Open(context.Context, *cdc.Checkpoint) error { return nil }

// Put buffers one line per record.
func (s *Sink) Put(_ context.Context, batch []cdc.Record) error {
	for i := range batch {
		s.w.Write(batch[i].Data) // a write error sticks; WriteByte reports it
		if err := s.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("stdout sink: %w", err)
		}
	}
	return nil
}

// Commit flushes the buffered lines to the writer.
func (s *Sink) Commit(context.Context, cdc.Checkpoint) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	return nil
}

// Close drops lines put since the last Commit; it does not close the
// writer, which the sink does not own.
func (s *Sink) Close() error { return nil }
