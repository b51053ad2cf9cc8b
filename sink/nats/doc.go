// Package nats is a sink that publishes records to a JetStream stream.
// Import it under another name (natssink) where nats.go's package nats is
// imported too.
//
// # Guarantee
//
// Put publishes each record asynchronously, with a Nats-Msg-Id made of the
// pipeline name and the record's source position, and Commit returns only
// when the stream acknowledged every publish of the batch; a publish error
// or timeout fails the commit, and the runtime then saves no checkpoint.
// After a crash, Tide replays from its last checkpoint and publishes those
// records again with the same ids, and the stream drops them as duplicates.
//
// # Outages
//
// While NATS is unreachable, Open waits for it and Commit retries, with
// capped, jittered backoff, for up to Config.MaxOutage (sink.nats
// max_outage, default 60s) without progress; then the pipeline fails,
// with an error that says for how long which servers were unreachable.
// Commit republishes the batch from its first unacknowledged record, in
// order and under the same Nats-Msg-Ids: the stream drops what it already
// holds, and stores the rest in batch order. For that order, the
// connection does not buffer publishes while it reconnects, and the
// client does not retry a publish by itself. Errors that a retry cannot
// fix (a stream that does not exist, a subject no stream captures, a
// message too large, a permission violation) fail at once.
//
// That makes delivery effectively-once as long as the restart happens
// within the stream's duplicate window (create_stream.duplicate_window,
// default 2m), and at-least-once beyond it: a replay after the window has
// passed appends the records again.
//
// A PubAck means the server holds the message, not that it is on disk: by
// default a JetStream server fsyncs every sync_interval (2 minutes), so a
// crash of the server's machine can lose acknowledged messages. Run the
// server with sync_interval: always for durability across power loss; Open
// logs a warning when it cannot confirm that setting.
//
// # Messages
//
// The subject is a template with {db} {coll} {op} {namespace}, taken from
// the event (for a MongoDB event, the database and collection; for a NATS
// event, the subject's first token and the rest). Headers carry Tide-Op,
// Tide-Namespace and, for MongoDB events, Tide-Cluster-Time ("T.I").
// Marker events are not published.
package nats
