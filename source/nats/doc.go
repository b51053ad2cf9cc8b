// Package nats is a source that reads NATS messages as Tide events: from
// a core subscription (at-most-once) or from a durable JetStream pull
// consumer (exactly-once and in order with the file sink). Import it under
// another name (natssource) where nats.go's package nats is imported too.
//
// # JetStream
//
// Open creates or updates the durable pull consumer from the Config, then a
// reader pulls messages into a bounded queue that Poll empties. It uses the
// client's Consume: requests for FetchBatch messages, each held open by the
// server for FetchMaxWait (at least 1s), the next sent when half of the
// current one arrived, all answered on one subscription, so that round
// trips overlap and messages keep the order the server sent them in.
// Payloads are validated in Poll, so that the network reader and the
// validation run on two cores.
//
// A message is acknowledged only through Ack, which the runtime calls after
// the sink committed the batch and the checkpoint naming it was saved. Ack
// hands the messages to a bounded asynchronous worker; it acknowledges a
// chunk with plain acks and the chunk's last message with a double ack
// (waiting up to AckTimeout for the server's confirmation). Messages handed
// out but not yet acknowledged are kept alive with in-progress acks, so a
// long batch does not run into AckWait. Close gives queued and in-flight
// acks until CloseTimeout (so that a drain's last batch is acknowledged),
// then abandons and counts the rest: the next run repositions past them.
//
// # Positions: Tide owns them
//
// A position is JSON text, {"stream_seq":N}: the stream sequence of the
// message. The checkpoint, not the consumer's ack floor, says where
// reading resumes, because deliveries are not gapless in stream order: a
// message delivered into a connection that broke stays unacknowledged on
// the server until its ack wait runs out, while newer messages are
// delivered at once, so "skip everything below the checkpoint" loses it and
// "wait for the redelivery" reorders.
//
// So the source repositions the consumer with the server's consumer reset
// API: on Open to the message after the restored checkpoint (or after the
// consumer's ack floor when there is none), dropping whatever an earlier
// reader left unacknowledged, so that the first delivery comes at once and
// is the next message in stream order. While running, the reader hands out
// only the next expected delivery: the server numbers deliveries 1, 2, ...
// after a reset and serves first deliveries in stream order, skipping
// messages outside the filter or deleted, so a gapless run of delivery
// sequences is the stream in order, with legitimate gaps only. A delivery
// sequence out of line (a delivery lost with a connection, a redelivery of
// something never seen), a reconnect, or an error of the client ends the
// consumption; the reader waits until every message it handed out has
// been committed and acknowledged (so the ack floor never passes the
// checkpoint, which matters for work-queue and interest streams), resets the
// consumer to the message after the last one, and consumes again. A
// delivery of a message already handed out (a redelivery after a stalled
// commit) is never handed out twice. Nothing waits for an ack wait.
//
// Open refuses a checkpoint that does not fit: of another stream or
// consumer (see Identity), past the end of the stream (the stream was
// recreated or lost messages), or behind a consumer floor that the
// configured deliver policy (new) cannot go back to. It logs a warning
// when messages after the checkpoint were removed from the stream before
// Tide read them (limits, purge). A consumer whose deliver policy or start
// differs from the configuration is refused rather than recreated; one
// deleted since the checkpoint is created again (deliver: all or
// by_start_sequence) and repositioned. One consumer serves one pipeline:
// another client pulling from it shows as gaps and makes the source
// reposition again and again.
//
// With the file sink, which truncates to its checkpoint, a JetStream
// pipeline is exactly-once and in stream order across connection cuts,
// NATS restarts and Tide crashes. A NATS server with file storage
// acknowledges a publish before it is on disk unless it runs with
// sync_interval: always; a server that then loses power may reuse stream
// sequences, which Open detects when the stream ends before the
// checkpoint.
//
// # Core
//
// A core subscription (optionally in a queue group) has no durable position:
// a restart misses what was published meanwhile. A reader goroutine feeds a
// bounded queue; when the subscription ends (its connection closed), Poll
// hands out what was queued and then returns an error wrapping cdc.ErrEnd.
// Positions are {"seq":N}, a per-source counter continued from the restored
// checkpoint.
//
// # Payloads
//
// Format json validates each payload by the rules of json.Valid; a payload that is not
// JSON is a decode error, handled per OnDecodeError: fail stops the pipeline
// with the message unacknowledged, skip acknowledges and counts it,
// dead_letter republishes it with its headers and the error to
// DeadLetterSubject (through JetStream, so the subject must be captured by a
// stream) and then acknowledges it; pipeline hands it out with
// cdc.Event.DecodeErr set, for the pipeline's on_error (the default of a
// pipeline file that sets on_error), and it is acknowledged with its batch.
package nats
