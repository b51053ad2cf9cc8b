package cdc

import (
	"context"
	"time"
)

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
