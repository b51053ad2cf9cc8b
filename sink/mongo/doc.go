// Package mongo is the MongoDB sink: it writes each batch into collections
// of another MongoDB deployment (or of a second embedded server) through
// the official Go driver, in one of two modes:
//
//   - mirror: the target collections follow the source's documents.
//     Inserts, replaces, updates and snapshot documents replace the
//     document with the same document key (upsert) by the event's full
//     document; deletes delete it. Within a batch only the last change of
//     each document is written, so order across documents does not
//     matter, and writes go as unordered bulk writes (in parallel when no
//     transaction holds them). Mirror mode needs full documents: the
//     configuration refuses a MongoDB source without full_document
//     update_lookup or required. An update without one (update_lookup
//     found the document deleted since) changes nothing: its delete
//     follows.
//   - append: each record's CDC envelope is inserted as a BSON document
//     (_namespace, _op, _document_key, _cluster_time, _wall_time,
//     _full_document, _before, _update_desc, _extra, _headers,
//     _resume_token), its _id made of the pipeline's name and the
//     record's position, so that a replay is a duplicate _id, which the
//     sink takes for what it is: a no-op.
//
// Config.Database and Config.Collection may hold {db} and {coll}, filled
// from each event's namespace; by default a change lands in the
// collection of the source's names.
//
// # Guarantees
//
// Sink.Checkpoints (checkpoint: sink) makes the sink keep the pipeline's
// checkpoint in the target: the document {_id: pipeline} of
// tide_checkpoints in Config.CheckpointDatabase, written in the
// multi-document transaction of the changes it covers: exactly-once. A
// transaction that fails transiently (a write conflict, a lost
// connection, an election) is retried whole; when the outcome of a
// commit is unknown, the next attempt reads the checkpoint document in
// its transaction, and a batch that did commit is not written again. A
// batch of more than Config.MaxTransactionWrites writes or
// Config.MaxTransactionBytes bytes is split into several transactions,
// each with the checkpoint of its last record. The checkpoint document
// also holds an epoch: a starting sink kills the session of the previous
// owner (ending the transaction a killed tide left open) and increments
// the epoch, and every transaction checks it, so that a tide still
// running the pipeline fails at its next commit instead of writing
// after the new one.
//
// Without checkpoint: sink the sink is at-least-once and idempotent:
// after a crash the batch is written again, with the same final state
// (mirror), or with its duplicates refused (append).
//
// # Collection events
//
// With Config.ApplyDDL a drop drops the target collection and a rename
// renames it (with dropTarget, as the source's rename succeeded), outside
// any transaction and between the transactions of the changes before and
// after it; without it they are logged and counted (Stats.DDLSkipped).
// Index changes, collection options and dropDatabase (each collection's
// drop comes first) are not replicated. A re-snapshot's end line is
// ignored: documents deleted during the gap a re-snapshot closes stay in
// the target.
//
// # Failures
//
// A document the target refuses (a validator, the size limit, a unique
// index) fails the pipeline with the target namespace and the _id, unless
// Config.OnWriteError is dead_letter: then the refused change, with the
// error, goes to Config.DeadLetter and the batch goes on. Authentication
// and unreachable-server errors name the URI without its password.
package mongo
