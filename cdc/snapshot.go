package cdc

import (
	"context"
	"errors"
	"time"
)

// An IncrementalSnapshotter is a source that can copy chosen collections
// again, or the part of them a filter matches, while it goes on
// streaming changes (tide snapshot --collection, POST /api/snapshots).
// Its methods are safe for concurrent use with Poll.
type IncrementalSnapshotter interface {
	// RequestSnapshot checks req and queues it; it returns the new
	// snapshot's id. A request the source refuses wraps ErrSnapshotRequest
	// (bad collections, filter or chunk), ErrSnapshotConflict (a
	// collection already being copied) or ErrSnapshotNotReady.
	RequestSnapshot(ctx context.Context, req SnapshotRequest) (string, error)
	// CancelSnapshot stops a running snapshot at its next chunk boundary.
	// An unknown id wraps ErrSnapshotNotFound.
	CancelSnapshot(id string) error
	// Snapshots lists the running snapshots and the last finished ones.
	Snapshots() []SnapshotInfo
}

// SnapshotRequest asks for an incremental snapshot.
type SnapshotRequest struct {
	Collections []string `json:"collections"`
	// Filter is a query document in relaxed Extended JSON; empty: every
	// document.
	Filter []byte `json:"filter,omitempty"`
	// Chunk is how many documents each chunk reads; 0: the source's
	// default.
	Chunk int `json:"chunk,omitempty"`
}

// Snapshot states.
const (
	SnapshotRunning   = "running" // also while it waits for a free slot: Copying is empty
	SnapshotDone      = "done"
	SnapshotCancelled = "cancelled"
	SnapshotFailed    = "failed"
)

// SnapshotInfo is one incremental snapshot as GET /api/snapshots shows it.
type SnapshotInfo struct {
	ID             string    `json:"id"`
	Collections    []string  `json:"collections"`
	Filter         string    `json:"filter,omitempty"` // canonical Extended JSON
	Chunk          int       `json:"chunk"`
	State          string    `json:"state"`
	DoneDocuments  int64     `json:"done_documents"`
	TotalDocuments int64     `json:"total_documents"`                // estimated
	Rate           float64   `json:"documents_per_second,omitempty"` // since this process started it
	ETASeconds     float64   `json:"eta_seconds,omitempty"`          // at that rate
	Requested      time.Time `json:"requested"`                      // when it was asked for
	Finished       time.Time `json:"finished,omitzero"`              // when it ended
	Reason         string    `json:"reason,omitempty"`               // why it failed or was cancelled
	Current        []string  `json:"copying,omitempty"`              // the collections being copied now
	Signal         string    `json:"signal,omitempty"`               // the _id of the signal document that asked, as Extended JSON
}

// Errors of an IncrementalSnapshotter.
var (
	ErrSnapshotRequest  = errors.New("bad snapshot request")
	ErrSnapshotConflict = errors.New("snapshot conflict")
	ErrSnapshotNotFound = errors.New("no such snapshot")
	// ErrSnapshotNotReady: the source is not open yet (or closed); ask
	// again in a moment.
	ErrSnapshotNotReady = errors.New("the source is not running")
)
