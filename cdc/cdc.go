// Package cdc is the vocabulary shared by sources, sinks and the runtime:
// events, positions, checkpoints, and the small interfaces a connector
// implements. Like database/sql/driver, it imports only the standard library,
// so every connector can depend on it without depending on each other.
//
// # The contract
//
// A Source hands out events in order, each with the Position to resume
// after it. The runtime (package pipeline) cuts them into batches, encodes
// them into Records and, for every batch, in this order:
//
//  1. calls Sink.Put with the batch's records, unless it has none (a batch
//     of markers only);
//  2. asks a Stater sink for its State;
//  3. calls Sink.Commit with the Checkpoint that will name the batch, also
//     for a batch that had no Put, so that an idle source's markers
//     advance a sink that keeps the checkpoint itself;
//  4. saves that checkpoint in the store, and tells a CheckpointObserver
//     sink;
//  5. acknowledges an Acker source up to the batch's last position.
//
// So a checkpoint never names a record the sink has not made durable, and
// an upstream never forgets an event the checkpoint does not cover. After a
// restart the runtime loads the last saved checkpoint and passes it to
// Sink.Open and then Source.Open: the sink drops or cuts whatever it was
// given after that checkpoint's Commit, and the source reads again exactly
// the events after its position. The result is no gap and no duplicate.
//
// Markers (OpMarker) are the runtime's business: they advance the
// checkpoint and are never put. A sink that keeps the checkpoint in its own
// transaction (the PostgreSQL sink) writes it in Commit and supplies the
// runtime's checkpoint store itself; the runtime does not know.
//
// Package cdc/cdctest checks a connector against this contract.
package cdc

import (
	"context"
	"errors"
)

// ErrEnd is returned by Source.Poll when the source has handed out its last
// event and never will have another (a finite generator, an invalidated
// change stream, a closed core subscription). Events returned together with
// ErrEnd are still delivered.
//
// A source whose end is not a success (a change stream invalidated because
// its collection was dropped) returns an error that wraps ErrEnd and says
// why: the runtime still delivers and commits every event, then reports
// that error, so that the command can exit with it.
var ErrEnd = errors.New("cdc: end of stream")

// Position is an opaque, source-defined resume point: a MongoDB resume token,
// a JetStream stream sequence, a generator's sequence number. It is JSON text,
// so that `tide checkpoint show` can print it, but only the source that made
// it interprets it.
type Position []byte

// Op is the kind of change an event records. MongoDB sources use the
// change-stream operationType names; other sources use OpInsert for a new
// message.
type Op string

const (
	OpInsert       Op = "insert"
	OpUpdate       Op = "update"
	OpReplace      Op = "replace"
	OpDelete       Op = "delete"
	OpSnapshot     Op = "snapshot" // a document copied by an initial snapshot
	OpDrop         Op = "drop"
	OpRename       Op = "rename"
	OpDropDatabase Op = "dropDatabase"
	OpInvalidate   Op = "invalidate"
	OpCreate       Op = "create"
	OpCreateIndex  Op = "createIndexes"
	OpDropIndex    Op = "dropIndexes"
	OpModify       Op = "modify"

	// OpMarker is a high-watermark: an event that carries only a Position,
	// so that an idle source still advances the checkpoint. Markers are
	// the runtime's business: encoders skip them, the runtime commits
	// their position, and a sink never receives one.
	OpMarker Op = "marker"
)

// Timestamp is a MongoDB cluster time: seconds and an increment.
type Timestamp struct {
	T uint32 // seconds since the Unix epoch
	I uint32 // ordinal within the second
}

// PayloadFormat says how a non-BSON payload is rendered into the envelope.
type PayloadFormat uint8

const (
	PayloadNone   PayloadFormat = iota // no payload; the event is BSON-shaped
	PayloadJSON                        // Payload is a JSON value, embedded as is
	PayloadString                      // Payload is UTF-8 text, embedded as a JSON string
	PayloadBase64                      // Payload is bytes, embedded as a base64 JSON string
)

// Event is one change read from a source. Document fields hold raw BSON
// exactly as the source received it: nothing is converted before the encode
// stage, which runs in parallel. A source must not reuse the memory of an
// event it has handed out.
type Event struct {
	Pos Position // resume here to read the events after this one
	Op  Op

	// Namespace is "db.collection" for MongoDB events and the subject for
	// NATS messages.
	Namespace   string
	ClusterTime Timestamp
	WallTimeMS  int64 // wall-clock time of the change, Unix milliseconds; 0 if unknown

	// MongoDB-shaped fields, each a raw BSON document or nil.
	DocumentKey  []byte // {_id: ...} (plus the shard key where there is one)
	FullDocument []byte
	PreImage     []byte // fullDocumentBeforeChange
	UpdateDesc   []byte // updateDescription
	ResumeToken  []byte // the change event's _id, a BSON document
	Extra        []byte // other event fields worth keeping (rename's "to", DDL descriptions), a BSON document or nil

	// Message-shaped fields, for sources such as NATS.
	Payload       []byte
	PayloadFormat PayloadFormat
	Headers       map[string][]string

	// Route is set by a route transform: it fills {route} in a sink's
	// templates (a file's path, a table, a subject). "" when none ran.
	Route string

	// DecodeErr is set by a source for a change it could not decode (a
	// NATS payload that is not JSON) and hands out anyway, so that the
	// runtime applies the pipeline's on_error to it (stage "decode"): it
	// is never encoded, and its position advances the checkpoint.
	DecodeErr error

	// Size is the number of bytes the event holds in memory, as charged
	// against in-flight budgets. Sources set it; if zero the runtime
	// estimates it from the byte fields.
	Size int
}

// MemSize returns the event's in-memory size for byte budgets.
func (e *Event) MemSize() int {
	if e.Size > 0 {
		return e.Size
	}
	return len(e.Pos) + len(e.Namespace) + len(e.DocumentKey) + len(e.FullDocument) +
		len(e.PreImage) + len(e.UpdateDesc) + len(e.ResumeToken) + len(e.Extra) + len(e.Payload) + 64
}

// Record is an event with its encoded form, as a sink receives it.
type Record struct {
	Event
	Data []byte // the encoded record, without a trailing newline
}

// Checkpoint is what the runtime persists after every commit: the source's
// position of the last event the sink made durable, the source's identity
// bindings, and the sink's own state (for the file sink, its committed
// byte length).
type Checkpoint struct {
	Source Position          // nil before the first commit
	Meta   map[string]string // set from an Identifier source; checked by the source on Open
	Sink   []byte            // JSON text or nil, as returned by a Stater sink
}

// Source reads events in order. Poll is called from a single goroutine.
type Source interface {
	// Open prepares the source to read the events after restored.Source.
	// restored is nil on a fresh start. A position the source cannot seek
	// to, or identity metadata that does not match, is an error: never a
	// silent start from the beginning or from "now".
	Open(ctx context.Context, restored *Checkpoint) error

	// Poll appends to buf up to max events that are ready now, without
	// waiting for more, and returns the extended slice. It returns ErrEnd
	// (possibly with a final set of events) when the source is exhausted.
	Poll(ctx context.Context, buf []Event, max int) ([]Event, error)

	// Ready returns a channel that receives a value when events may be
	// available to Poll. The runtime waits on it when Poll returns nothing,
	// so an idle pipeline sleeps instead of spinning.
	Ready() <-chan struct{}

	// Close releases the source. It is called whether or not Open
	// succeeded, and a second call returns nil.
	Close() error
}

// Acker is a Source that must be told when events are durably delivered,
// such as a JetStream consumer. Ack is called only after the checkpoint
// naming upTo was saved; it covers every event up to and including upTo.
type Acker interface {
	Ack(ctx context.Context, upTo Position) error
}

// Identifier is a Source whose positions are only meaningful for one
// upstream identity (a collection UUID, a replica set id). The runtime
// stores Identity in every checkpoint; the source checks it on Open.
type Identifier interface {
	Identity() map[string]string
}

// Sink writes records. Put and Commit are called from a single goroutine.
type Sink interface {
	// Open prepares the sink. restored is the last saved checkpoint, or nil;
	// a sink whose state is part of the checkpoint (a file's committed
	// length) restores itself from restored.Sink.
	Open(ctx context.Context, restored *Checkpoint) error

	// Put hands a batch of records to the sink, never a marker and never
	// an empty batch. It may buffer them; nothing is durable until Commit
	// returns. The sink must not retain batch or any memory it points to:
	// the runtime reuses it once Put returns. After a failed Put the
	// runtime stops; the sink drops what the batch had buffered.
	Put(ctx context.Context, batch []Record) error

	// Commit makes every record put since the last commit durable and
	// returns only then. It is also called with no Put before it, for a
	// batch of markers only. next is the checkpoint the runtime saves once
	// Commit returns; a sink that keeps the checkpoint in its own
	// transaction writes it here.
	Commit(ctx context.Context, next Checkpoint) error

	// Close releases the sink, dropping what was put and not committed.
	// It is called whether or not Open succeeded, and a second call
	// returns nil.
	Close() error
}

// Stater is a Sink with state of its own in the checkpoint. State is called
// after the last Put of a batch and before its Commit.
type Stater interface {
	State() []byte
}

// CheckpointObserver is a Sink that wants to know when a checkpoint naming
// its state has been saved (the file sink keeps an ownership marker until
// then). CheckpointSaved is called after each save, from a goroutine other
// than the one calling Put and Commit; it must not block.
type CheckpointObserver interface {
	CheckpointSaved(cp Checkpoint)
}
