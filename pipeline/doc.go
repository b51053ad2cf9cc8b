// Package runtime runs one pipeline: poll → encode → put → commit →
// checkpoint save → acknowledge.
//
// A Pipeline owns a source, an encode function, a sink and a checkpoint
// store. Run has four stages, each one goroutine with one job:
//
//   - the reader (read.go) polls the source and cuts what it reads into
//     batches, and batches into chunks. A batch closes when it holds
//     Config.MaxRecords events or Config.MaxBytes bytes, when the source is
//     caught up (Poll returned fewer events than asked for), or
//     Config.CommitInterval after its first event. An idle reader sleeps on
//     the source's Ready channel, never on a timer.
//   - the encode pool (encode.go, EncodeOrdered) encodes chunks on
//     Config.Workers goroutines and hands them on in input order.
//   - the committer (commit.go) puts each batch and commits it, one batch
//     at a time, in order.
//   - the saver (commit.go) saves the checkpoint of each committed batch
//     and then acknowledges the source, in the same order.
//
// The loop is pipelined: while the sink commits one batch, the next is read
// and encoded, and while a checkpoint is saved, the next batch is written.
// At most two batches are in flight, so memory is bounded by about twice
// MaxRecords and MaxBytes, and the saves trail the commits by at most two
// batches.
//
// The invariant, enforced in commit.go: a checkpoint names only events the
// sink has made durable (it is saved after Sink.Commit returns), and the
// source is acknowledged only after that checkpoint was saved.
//
// Markers (cdc.OpMarker) are neither encoded nor put, but their positions
// are committed. A batch of markers only gives a plain sink a Commit with no
// Put; a Transactional sink gets no transaction for it and the checkpoint is
// saved to the store, unless the sink is also a cdc.CheckpointStore, which
// gets Begin and Commit with no Put so that its own checkpoint advances.
//
// Control: Pause, Resume and Drain act on a running Pipeline; Start runs one
// in its own goroutine and returns a Handle, and a Handle that is dropped
// drains its pipeline.
//
// EncodeOrdered and Chunk are exported for benchmarks and for other code
// that needs ordered parallel encoding; the pipeline uses them internally.
package pipeline
