// Package runtime runs one pipeline: poll → encode → put → commit →
// checkpoint save → acknowledge.
//
// A Pipeline owns a source, an encode function, a sink and a checkpoint
// store. Run reads batches from the source, encodes them on an ordered pool
// of workers (EncodeOrdered), and hands each batch to the sink in source
// order. The loop is pipelined: while the sink commits one batch, the next
// is read and encoded, and at most two batches are in flight, each bounded
// by Config.MaxRecords and Config.MaxBytes.
//
// The invariant, enforced in commit.go: a checkpoint names only events the
// sink has made durable (it is saved after Sink.Commit returns), and the
// source is acknowledged only after that checkpoint was saved.
//
// Control: Pause, Resume and Drain act on a running Pipeline; Start runs one
// in its own goroutine and returns a Handle, and a Handle that is dropped
// drains its pipeline.
package runtime
