package cdc

import (
	"context"
	"time"
)

// The optional abilities below are found by type assertion, as
// database/sql finds driver.Pinger: a source or sink that has one says so
// by implementing it, and every part that shows a pipeline (the status
// page, the progress line, a worker's table, /metrics) asks the same
// question the same way, never by the connector's concrete type.

// A Lagger is a source that can tell how far its acknowledged position
// trails what there is to read. Lag is called from other goroutines than
// Poll, about once a second; it must not block.
type Lagger interface {
	Lag(now time.Time) Lag
}

// Lag is how far a source's acknowledged position trails its upstream, in
// what the source can measure: time (a change stream's cluster time),
// messages (a JetStream consumer's pending count), or both.
type Lag struct {
	// Time is how long ago the change at the acknowledged position was
	// made; valid when TimeKnown.
	Time      time.Duration
	TimeKnown bool
	// At is the cluster time of the acknowledged position, or zero.
	At Timestamp
	// Messages is how many messages upstream still waits to deliver;
	// valid when MessagesKnown.
	Messages      uint64
	MessagesKnown bool
	// Sequenced says that the source's positions are stream sequence
	// numbers (JetStream), which a progress line shows as such.
	Sequenced bool
}

// A SnapshotReporter is a source that copies existing data before it
// streams changes, and reports how far the copy is.
type SnapshotReporter interface {
	SnapshotProgress() SnapshotProgress
}

// SnapshotProgress is a snapshot's state: Copying until the copy is over,
// and each namespace's documents done and estimated total, in name order.
type SnapshotProgress struct {
	Copying     bool
	Collections []NamespaceProgress
}

// NamespaceProgress is one namespace's share of a snapshot.
type NamespaceProgress struct {
	Namespace   string
	Done, Total int64
}

// A StatusDetailer is a source with details of its own for a status page
// (the MongoDB source's oplog headroom). StatusDetails is called from
// another goroutine than Poll, about once a second; it must not block and
// must return a fresh map of JSON-encodable values.
type StatusDetailer interface {
	StatusDetails() map[string]any
}

// A CheckpointStore keeps a pipeline's checkpoints: the data directory's
// files, a NATS KV bucket, or a sink's own table. Load returns nil, nil
// when the pipeline has none.
type CheckpointStore interface {
	Load(ctx context.Context, pipeline string) (*Checkpoint, error)
	Save(ctx context.Context, pipeline string, cp Checkpoint) error
}

// A CheckpointKeeper is a sink that can keep the pipeline's checkpoint in
// its own transactions (checkpoint: sink in a pipeline file), which makes
// it exactly-once: KeepCheckpoints switches it to do so and returns the
// store the runtime must use with it.
type CheckpointKeeper interface {
	KeepCheckpoints() CheckpointStore
}

// SourceInfo is what a configured source tells the rest of a pipeline
// file about its records, so that a sink's defaults and checks can depend
// on the source without naming it: a source's Config offers it through a
// Describe() SourceInfo method.
type SourceInfo struct {
	// Section is the source's path in the pipeline file: "source.mongo".
	Section string
	// Table names the table or collection its records go to where a sink
	// names none: the collection's name, "{coll}" for many collections
	// of one database, "{db}_{coll}" for a whole cluster; "" if none.
	Table string
	// Documents says that records are documents with an _id (changes of
	// MongoDB collections), which a mirror applies by key.
	Documents bool
	// FullUpdates says that every update carries the whole document
	// after the change, which a mirror needs. Where it does not,
	// PartialUpdates says why, beginning with the key to change:
	// `source.mongo.full_document: "delta" gives updates without their
	// full document; set it to update_lookup or required`.
	FullUpdates    bool
	PartialUpdates string
}

// A CheckpointTable is a sink's Config whose sink keeps the pipeline's
// checkpoint in its own transactions (checkpoint: sink): it reaches that
// checkpoint without running the pipeline, for `tide checkpoint` and
// `tide snapshot`. ReadCheckpoint takes no lock and returns nil, nil when
// there is none; RewriteCheckpoint and DeleteCheckpoint hold the
// pipeline's lock, so they refuse while the pipeline runs. change sees nil
// when there is no checkpoint, and writes nothing by returning nil.
type CheckpointTable interface {
	ReadCheckpoint(ctx context.Context, pipeline string) (*Checkpoint, error)
	RewriteCheckpoint(ctx context.Context, pipeline string, change func(*Checkpoint) (*Checkpoint, error)) error
	DeleteCheckpoint(ctx context.Context, pipeline string) error
}
