package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/tide-cdc/tide/cdc"
)

// storedCheckpoint is the JSON of a tide_checkpoints row. A position is
// JSON text by contract; one that is not is kept as a string in
// source_text, so that nothing is lost.
type storedCheckpoint struct {
	Source     json.RawMessage   `json:"source"`
	SourceText *string           `json:"source_text,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Sink       json.RawMessage   `json:"sink,omitempty"`
	SinkText   *string           `json:"sink_text,omitempty"`
}

func marshalCheckpoint(cp cdc.Checkpoint) ([]byte, error) {
	var sc storedCheckpoint
	sc.Meta = cp.Meta
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

func unmarshalCheckpoint(raw []byte) (*cdc.Checkpoint, error) {
	var sc storedCheckpoint
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
