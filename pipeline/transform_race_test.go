package pipeline

import (
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/source/generate"
)

// TestTransformWhileTheBatchFills: a source that hands out a few events
// a poll (generate at a rate), so that a batch's first chunks are encoded,
// and transformed in place, while the source still appends to it. Under
// -race this fails if the batch's events move as it grows.
func TestTransformWhileTheBatchFills(t *testing.T) {
	src := generate.New(generate.Config{Count: 3000, Rate: 30000, PayloadBytes: 8})
	sink := newSink(&callLog{})
	p := New(Config{Name: "p", MaxRecords: 1000, Workers: 2, CommitInterval: time.Second, Logger: discard(), Transform: upper{}},
		src, func(dst []byte, ev *cdc.Event) ([]byte, error) { return append(dst, ev.Pos...), nil }, sink, newStore(&callLog{}))
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.committedList()); got != 3000 {
		t.Fatalf("committed %d records, want 3000", got)
	}
}
