package cdc

import (
	"context"
	"errors"
	"time"
)

// ErrRefused is wrapped by a sink's Commit (or Put) error when a record
// of the batch is refused for good, for what it holds (a PostgreSQL type
// or constraint error, a message too large), and no retry will change
// that; the sink has dropped the batch, and takes the next one. With
// on_error skip or dead_letter, the runtime then finds the refused
// records by splitting the batch, sets them aside and commits the others
// in order. A refusal that is not the records' (a missing table, a
// permission) must not wrap it: every record would be set aside.
var ErrRefused = errors.New("cdc: record refused by the sink")

// DeadLetter is a change the pipeline set aside instead of stopping: one
// that failed to decode, to transform or to encode, or that the sink
// refused for good, with on_error: dead_letter.
type DeadLetter struct {
	// Event is the change as the source handed it out, before any
	// transform.
	Event Event
	// Stage is where it failed: "decode", "transform", "encode" or
	// "sink".
	Stage string
	// Err is the error's text.
	Err string
	// Time is when it failed.
	Time time.Time
}

// A DeadLetterSink is a Sink that keeps dead letters in the same
// transaction as the batch they came from (the PostgreSQL sink's
// tide_dead_letters table), so that exactly-once holds for them too.
// PutDeadLetters is called after the batch's Put, if any, and before its
// Commit, from the goroutine that calls Put and Commit.
type DeadLetterSink interface {
	PutDeadLetters(ctx context.Context, letters []DeadLetter) error
}

// A DeadLetterStore keeps the dead letters of a sink without
// transactions (a file, a NATS subject). Write returns once they are
// durable: the runtime saves the batch's checkpoint only after. A letter
// written again after a crash (the batch is read again) must not be kept
// twice: DeadLetter.Event.Pos and Stage identify it.
type DeadLetterStore interface {
	Write(ctx context.Context, letters []DeadLetter) error
	Close() error
}
