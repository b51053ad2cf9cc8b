package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
)

// TestStatsLastWallTime: Stats.LastWallTime is the wall time of the last
// committed change that had one; markers after it leave it alone.
func TestStatsLastWallTime(t *testing.T) {
	evs := events(1, 4)
	for i := range evs {
		evs[i].WallTimeMS = 1_700_000_000_000 + int64(i)*7
	}
	evs = append(evs, marker(4))
	src := newSource(&callLog{}, evs)
	src.finish()
	p := New(Config{Name: "p"}, src, testEncode, newSink(&callLog{}), newStore(&callLog{}))
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if want := time.UnixMilli(1_700_000_000_014); !st.LastWallTime.Equal(want) {
		t.Errorf("LastWallTime %v, want %v (the last change's)", st.LastWallTime, want)
	}
	if string(st.LastCheckpoint.Source) != "4" {
		t.Errorf("checkpoint at %s, want the marker's 4", st.LastCheckpoint.Source)
	}
}

// TestErr: Err is nil until Run returns, then Run's result.
func TestErr(t *testing.T) {
	src := newSource(&callLog{}, append(events(1, 2), cdc.Event{Pos: pos(2), Op: cdc.OpInsert, Payload: []byte("bad")}))
	p := New(Config{Name: "p"}, src, testEncode, newSink(&callLog{}), newStore(&callLog{}))
	if err := p.Err(); err != nil {
		t.Fatalf("Err before Run: %v", err)
	}
	err := p.Run(context.Background())
	if !errors.Is(err, errBadEvent) {
		t.Fatalf("Run: %v, want the encode error", err)
	}
	if got := p.Err(); got != err {
		t.Errorf("Err after Run: %v, want Run's %v", got, err)
	}
	if p.State() != Failed {
		t.Errorf("state %s, want failed", p.State())
	}
}
