package main

import (
	"context"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// snapshotsOnly is a source that lists incremental snapshots.
type snapshotsOnly struct {
	cdc.Source
	list []cdc.SnapshotInfo
}

func (s snapshotsOnly) RequestSnapshot(context.Context, cdc.SnapshotRequest) (string, error) {
	return "", cdc.ErrSnapshotConflict
}
func (s snapshotsOnly) CancelSnapshot(string) error   { return cdc.ErrSnapshotNotFound }
func (s snapshotsOnly) Snapshots() []cdc.SnapshotInfo { return s.list }

func TestIncrementalProgress(t *testing.T) {
	src := snapshotsOnly{list: []cdc.SnapshotInfo{
		{ID: "1", State: cdc.SnapshotDone, DoneDocuments: 10, TotalDocuments: 10},
		{ID: "2", State: cdc.SnapshotRunning, DoneDocuments: 12000, TotalDocuments: 40000, Rate: 2400, ETASeconds: 11.7},
		{ID: "3", State: cdc.SnapshotCancelled},
	}}
	if got, want := incrementalProgress(src), "snapshot 2 12000/40000 docs 30% 2400/s ETA 11 s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := incrementalProgress(snapshotsOnly{}); got != "" {
		t.Errorf("nothing running: got %q", got)
	}
	if got := joinNonEmpty("a", ""); got != "a" {
		t.Errorf("joinNonEmpty: %q", got)
	}
}
