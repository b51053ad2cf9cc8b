// Package postgres is the PostgreSQL sink. It writes each batch in one
// transaction through github.com/jackc/pgx/v5, in one of two modes:
//
//   - mirror: one row per document, keyed by the document key. A new
//     table gets typed columns (Config.Columns auto; see "Typed tables"
//     below); with ColumnsDocument, or an existing table made so, its
//     columns are _id (text, the document key in canonical Extended JSON,
//     primary key), doc (jsonb, the full document in relaxed Extended
//     JSON; null for a document only ever seen deleted), _key (generated:
//     the key's plain form, indexed; tables made before it have none),
//     _tide_op, _tide_cluster_time
//     (bigint, seconds<<32 | increment), _tide_deleted (boolean) and
//     _tide_synced_at (timestamptz). Inserts, replaces, updates and
//     snapshot rows upsert the document; deletes set _tide_deleted, or
//     delete the row when Config.SoftDelete is false. A row is never
//     overwritten by an event with an older cluster time, so replaying
//     events is harmless. An insert or replace without a full document
//     is refused. An update without one is applied from its update
//     description when Config.PartialUpdates is set (a MongoDB source
//     with full_document delta or when_available; FitSource sets it):
//     one UPDATE per update, after the batch's upserts and deletes, in
//     event order, setting only the columns, or the paths inside jsonb
//     and doc, it changes (delta.go); one whose row is missing fails the
//     batch. Without PartialUpdates such an update, which update_lookup
//     gives when the document was deleted since, changes nothing (its
//     delete follows).
//     Collection-level events (drop, rename, DDL) are not mirrored.
//     A MongoDB re-snapshot (tide snapshot) copies the documents again
//     with the cluster time of its start; its end line then deletes (or
//     marks deleted) the rows older than that: documents deleted during
//     the gap the copy closed.
//   - append: one row per event, with a bigserial id and the columns of the
//     CDC envelope (_namespace, _op, _document_key, _cluster_time_s,
//     _cluster_time_i, _wall_time_ms, _full_document, _before,
//     _update_desc, _extra, _headers, _resume_token) taken from the encoded
//     record, and _tide_synced_at.
//
// # Batches
//
// Put only copies the batch into the sink's own buffers, so that a batch
// can be retried after a lost connection. Commit writes it in three round
// trips. Mirror: BEGIN; COPY into the session's temporary staging table;
// and one flight of one set-based statement per kind of operation (upsert,
// then delete), the checkpoint row and COMMIT; only the last event of a
// batch for each document key is staged, so it alone decides the row.
// Append: BEGIN; a binary COPY straight into each table, in event order,
// of the columns Put took from each record's envelope; and the checkpoint
// row and COMMIT.
//
// # Guarantees
//
// Sink.Checkpoints (checkpoint: sink) is the one switch that makes the
// sink keep the pipeline's checkpoint: the row of
// tide_checkpoints(pipeline, checkpoint, updated_at) in the same schema,
// written in the batch's transaction. Pass what it returns to the pipeline
// as its checkpoint store: the rows and the checkpoint commit together,
// which is exactly-once. The session
// holds an advisory lock on the pipeline's checkpoint, so a second tide
// running the same pipeline is refused, and a restarted one waits until
// the session of a killed one has ended (and with it, its last
// transaction) before it reads the checkpoint. If the connection breaks
// after COMMIT was sent, the sink reconnects, waits until the old server
// session is gone (terminating it if it lingers), and reads the checkpoint
// row: if it is the batch's checkpoint the batch committed and is not
// applied again; otherwise it is retried.
//
// With any other checkpoint store the sink is at-least-once: after a crash
// between the sink's COMMIT and the checkpoint save, the batch is written
// again. Mirror mode is idempotent (the cluster-time guard makes a replayed
// event a no-op); append mode then holds the replayed events twice.
//
// # Failures
//
// A connection error (or a serialization failure, deadlock, or server
// shutdown) rolls back and retries the whole batch with capped, jittered
// backoff for up to Config.RetryTimeout; the batch is one transaction, so
// a retry cannot duplicate it. Any other error from PostgreSQL (a unique
// violation, a value the column type refuses) rolls the batch back and
// fails the pipeline with the statement and the offending document key.
//
// # Schema
//
// With Config.CreateTable the table is created if missing;
// tide_checkpoints, tide's own, is created whenever the sink keeps the
// checkpoint. An existing table is checked: missing columns, columns of
// another type, a missing primary key on _id (mirror), and extra NOT NULL
// columns without a default are listed in one error. Identifiers are
// quoted and data only ever travels as COPY values or parameters.
//
// # A table per namespace
//
// Config.Table may hold {db} and {coll}, filled from each event's
// namespace ("db.coll"): table: "{coll}" mirrors each collection into a
// table of its name. Each table is created (with CreateTable) or checked
// when its first row arrives, before the batch's transaction; the rows of
// every table and the checkpoint still commit in that one transaction.
// The rows of all tables go into the staging table in one COPY, each
// tagged with its table's index, and each table's statements take their
// own. A rendered name is always quoted as an identifier, never spliced
// into SQL. A name longer than PostgreSQL's 63 bytes is cut to 54 bytes
// (at a character boundary) plus "_" and the first 8 hex digits of its
// SHA-256: the same name on every run, distinct for names that only
// differ past the cut. Without CreateTable, a missing table fails the
// batch, naming the table and the namespace. In append mode a collection
// event is a row of its namespace's table like any event.
//
// In mirror mode with {coll} in the template, a table is one collection's
// and follows it, in the batch's transaction: a drop deletes the rows up
// to the drop's cluster time (with SoftDelete, marks them deleted, _tide_op
// "drop"); a rename moves them to the new name's table (made if missing,
// with CreateTable) where no newer row for their _id is, and deletes them
// from the old one. Both cover only rows up to their own cluster time, so
// they apply after the batch's rows, and a replayed batch changes nothing.
// A collection dropped or renamed before any row of it reached the sink
// gets no table. A rename's event must carry Extra {to: {db, coll}}; one
// with dropTarget leaves the old target's rows that the move does not
// replace. Without {coll} (one table, or one per database), drops and
// renames change no row.
//
// # Typed tables
//
// A typed table has the key as a primary key of its own type (bigint,
// text, uuid, else jsonb), a column per field typed from the BSON it
// first carries (fields of nested objects down to Config.FlattenDepth
// named parent__child), _tide_overflow (jsonb) and the _tide_* columns.
// Put stages raw BSON; Commit plans, per typed table, the columns the
// batch adds and widens (integer → bigint → numeric), runs that DDL in
// the batch's transaction, COPYs each table's rows into a staging table
// of its own, made again under a new name when the layout changed, and
// merges them. A value that fits no column (drift that cannot widen, a
// pin it does not fit, past the 1,600-column cap, NUL bytes) goes into
// _tide_overflow under its field path and is counted. tide_columns
// records each column's path and every decision, so that a restart
// knows the paths of its columns and an operator sees how the shape
// evolved. A table's layout becomes the sink's own only once its batch
// committed.
package postgres
