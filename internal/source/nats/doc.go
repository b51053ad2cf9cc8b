// Package natssource reads NATS messages as Tide events: from a core
// subscription (at-most-once) or from a durable JetStream pull consumer
// (at-least-once). It lives in internal/source/nats and is named natssource
// so that it does not clash with nats.go's package nats.
//
// # JetStream
//
// Open creates or updates the durable pull consumer from the Config, then a
// reader pulls messages into a bounded queue that Poll empties. It uses the
// client's Consume: requests for FetchBatch messages, each held open by the
// server for FetchMaxWait (at least 1s), the next sent when half of the
// current one arrived, all answered on one subscription, so that round
// trips overlap and messages keep the order the server sent them in (two
// Fetch calls in flight would interleave). An error the client reports
// stops the consumption, and the reader starts a new one after a backoff
// of 500ms, 1s, 2s, 4s, then 5s (each ±20%, jittered from a randomly
// seeded generator); idle pulls are not errors and any progress resets the
// count. Payloads are validated in Poll, so that the network reader and
// the validation run on two cores.
//
// A message is acknowledged only through Ack, which the runtime calls after
// the sink committed the batch and the checkpoint naming it was saved. Ack
// hands the messages to a bounded asynchronous worker; it acknowledges a
// chunk with plain acks and the chunk's last message with a double ack
// (waiting up to AckTimeout for the server's confirmation). A full backlog
// drops the acks, counted and logged: the broker redelivers those messages
// after AckWait. Messages handed out but not yet acknowledged are kept alive
// with in-progress acks, so a long batch does not run into AckWait. Close
// gives queued and in-flight acks until CloseTimeout (so that a drain's
// last batch is acknowledged), then abandons and counts what is still
// queued and cancels what is in flight: the broker redelivers those.
//
// # Positions and restarts
//
// The durable consumer's ack floor, not Tide's checkpoint, is the position a
// JetStream source resumes from. A position is JSON text,
// {"stream_seq":N,"consumer_seq":M}; Ack(upTo) acknowledges every message
// handed out up to consumer_seq M. On Open, a restored checkpoint is
// checked: its identity (stream and consumer, see Identity) must match the
// configuration, and the consumer must still exist on the server. A
// restored checkpoint whose consumer is gone is refused, because the
// configured start (deliver: all, by_start_sequence, ...) would silently
// replay or skip messages: reset the Tide checkpoint or name a new consumer.
// A consumer whose deliver policy or start differs from the configuration is
// refused as well, rather than recreated.
//
// The restored position is still used, to drop duplicates: a crash between
// saving a checkpoint and acknowledging its messages leaves them pending,
// and the broker redelivers them; messages at or below the restored stream
// sequence are acknowledged again and not handed out. Open also waits out
// AckWait when an earlier reader left messages unacknowledged, because the
// broker redelivers them only then (before any newer message): reading at
// once would hand out newer messages first. With the file sink, which
// truncates to its checkpoint, a JetStream pipeline is exactly-once and in
// stream order across crashes.
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
// Format json validates each payload with json.Valid; a payload that is not
// JSON is a decode error, handled per OnDecodeError: fail stops the pipeline
// with the message unacknowledged, skip acknowledges and counts it,
// dead_letter republishes it with its headers and the error to
// DeadLetterSubject (through JetStream, so the subject must be captured by a
// stream) and then acknowledges it.
package natssource
