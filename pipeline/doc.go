// Package pipeline runs one pipeline: poll → encode → put → commit →
// checkpoint save → acknowledge.
//
// A Pipeline owns a source, an encode function, a sink and a checkpoint
// store. Run has four stages, each one goroutine with one job:
//
//   - the reader (read.go) polls the source and cuts what it reads into
//     batches, and batches into chunks. A batch closes when it holds
//     Config.MaxRecords events or Config.MaxBytes bytes, or
//     Config.CommitInterval after its first event. When the source is
//     caught up (Poll returned fewer events than asked for) it is a group
//     commit: the batch stays open while the committer writes an earlier
//     one, and with the committer idle it lingers as long as the last
//     commit took (at most 5 ms) for more. An idle reader sleeps on the
//     source's Ready channel, never on a timer.
//   - the encode pool (encode.go, encodeOrdered) encodes chunks on
//     Config.Workers goroutines and hands them on in input order.
//   - the committer (commit.go) puts each batch and commits it, one batch
//     at a time, in order.
//   - the saver (commit.go) saves the checkpoint of each committed batch
//     and then acknowledges the source, in the same order.
//
// The loop is pipelined: while the sink commits one batch, the next is read
// and encoded, and while a checkpoint is saved, the next batch is written.
// At most two batches are in flight, so memory is bounded by about twice
// MaxRecords and MaxBytes. Committed batches wait for the saver in a short
// queue (four): when the checkpoint store is slower than the sink (a
// replicated NATS KV bucket), the batches waiting share one save of the
// newest checkpoint, so saves trail the commits by at most five batches
// and never run ahead of them; acknowledgements follow the saves. A store
// whose saves take a while (a disk flush) is spaced while another batch is
// on its way to the sink: the next save starts no sooner than nineteen save
// times (at most 10 ms) after the last began.
//
// # The commit path
//
// Every batch takes the same path, whatever the sink: Put (if the batch has
// records), State (a cdc.Stater sink), Commit, then Checkpointer.Save,
// CheckpointSaved (a cdc.CheckpointObserver sink) and Ack (a cdc.Acker
// source). The invariant, enforced in commit.go: a checkpoint names only
// events the sink has made durable (it is saved after Sink.Commit returns),
// and the source is acknowledged only after that checkpoint was saved.
//
// Markers (cdc.OpMarker) are the pipeline's business: they are neither
// encoded nor put, but their positions are committed. A batch of markers
// only gets a Commit with no Put, so that an idle source still advances
// the checkpoint. A sink that keeps the checkpoint in its own transaction
// writes it in Commit and is passed as its own Checkpointer (see the
// PostgreSQL sink's Checkpoints); the pipeline knows nothing of
// transactions.
//
// # Control
//
// Pause, Resume and Drain act on a running Pipeline: Pause returns once
// every batch read before it is committed and saved, and nothing is
// committed until Resume; Drain stops reading, commits what is in flight
// and makes Run return nil. A caller that runs Run in a goroutine of its
// own learns that the pipeline opened from Opened, that Run returned from
// Done, and what it returned from Err.
package pipeline
