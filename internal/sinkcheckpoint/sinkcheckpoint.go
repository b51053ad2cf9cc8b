// Package sinkcheckpoint holds what the sinks that keep the pipeline's
// checkpoint in their own transactions (sink/postgres, sink/mongo) share:
// the checkpoint's JSON form in the target, and the ledger of the
// checkpoints a sink committed, which the pipeline's Save must name.
package sinkcheckpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tide-cdc/tide/cdc"
)

// stored is the JSON of a kept checkpoint. A position is JSON text by
// contract; one that is not is kept as a string in source_text (and a
// sink state in sink_text), so that nothing is lost.
type stored struct {
	Source     json.RawMessage   `json:"source"`
	SourceText *string           `json:"source_text,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Sink       json.RawMessage   `json:"sink,omitempty"`
	SinkText   *string           `json:"sink_text,omitempty"`
}

// Marshal returns the JSON a sink keeps for cp.
func Marshal(cp cdc.Checkpoint) ([]byte, error) {
	sc := stored{Meta: cp.Meta}
	switch {
	case cp.Source == nil:
		sc.Source = json.RawMessage("null")
	case json.Valid(cp.Source):
		sc.Source = json.RawMessage(cp.Source)
	default:
		t := string(cp.Source)
		sc.SourceText = &t
	}
	switch {
	case cp.Sink == nil:
	case json.Valid(cp.Sink):
		sc.Sink = json.RawMessage(cp.Sink)
	default:
		t := string(cp.Sink)
		sc.SinkText = &t
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

// Unmarshal parses what Marshal returned.
func Unmarshal(raw []byte) (*cdc.Checkpoint, error) {
	var sc stored
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", raw, err)
	}
	cp := &cdc.Checkpoint{Meta: sc.Meta}
	switch {
	case sc.SourceText != nil:
		cp.Source = cdc.Position(*sc.SourceText)
	case len(sc.Source) > 0 && string(sc.Source) != "null":
		cp.Source = cdc.Position(sc.Source)
	}
	switch {
	case sc.SinkText != nil:
		cp.Sink = []byte(*sc.SinkText)
	case len(sc.Sink) > 0 && string(sc.Sink) != "null":
		cp.Sink = []byte(sc.Sink)
	}
	return cp, nil
}

// maxPending bounds the committed checkpoints a Ledger keeps. The
// pipeline's saves trail its commits by at most five batches (it saves
// only the newest of the batches waiting together).
const maxPending = 8

// Ledger records the checkpoints a sink committed, in the form Marshal
// gives, for the pipeline's Save to find: a store passed to a pipeline
// with another sink fails at once instead of recording progress no
// transaction made. Its zero value is ready.
type Ledger struct {
	mu      sync.Mutex // guards the field below
	pending [][]byte   // committed and not yet saved, oldest first
}

// Committed records that the sink's transaction wrote b.
func (l *Ledger) Committed(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == maxPending {
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, b)
}

// Saved reports whether cp was committed, and forgets it and what was
// committed before it.
func (l *Ledger) Saved(cp cdc.Checkpoint) (bool, error) {
	b, err := Marshal(cp)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.pending {
		if bytes.Equal(p, b) {
			l.pending = l.pending[i+1:]
			return true, nil
		}
	}
	return false, nil
}
