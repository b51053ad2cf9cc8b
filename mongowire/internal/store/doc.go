// Package store is the storage engine of the embedded MongoDB-compatible
// server: databases and collections (with UUIDs), their documents and
// indexes, durability, the oplog that records every write in commit order,
// and the cluster clock. It speaks in BSON (bson.Raw) and fails with
// *mongoerr.Error values that carry MongoDB's codes and messages; the query
// language (filters, updates, projections, sorts, pipelines) is package mql.
//
// # Concurrency
//
// One read-write lock guards the whole catalog. A write command (an insert
// batch, one update or delete statement, findAndModify, a DDL command) holds
// the write lock from start to end, so it is atomic, and writes are
// serialized: commit order, oplog order and cluster-time order are the same
// order. Reads hold the read lock only while they collect the matching
// documents; sorting, projection and pipelines run after it is released.
// Stored documents are never modified in place (an update stores a new
// document), so a read returns a point-in-time snapshot by keeping slice
// headers, without copying bytes.
//
// # Transactions
//
// A multi-document transaction (Begin, then Txn's reads and writes,
// Commit or Abort) writes in place with undo records and holds its oplog
// entries back until the commit journals them with one write, all at one
// cluster time. Readers outside it, and its own reads of what others
// committed after it began, see through an overlay of pre-images; see
// txn.go for the whole design.
//
// # Documents and indexes
//
// A collection keeps its documents as records sorted by a record id that
// grows with every insert, so natural order is insertion order; an update
// keeps the record's place. Each index, the _id index included, is an
// ordered set of (key values, record id) entries in mql.Compare order, held
// in a two-level B-tree (a sorted list of sorted chunks). Key values are
// sub-slices of the stored document. An array yields one entry per element
// (multikey); a compound key may hold at most one array, as in MongoDB;
// descending fields invert their part of the order. Unique indexes treat a
// missing field as null; sparse indexes skip documents without the fields;
// partial indexes index only documents matching partialFilterExpression.
//
// A query is planned from mql.Filter.Predicates: an equality, $in or range
// predicate on the leading field of an index (preferring _id, then unique
// indexes, then equality over ranges) yields candidate record ids; anything
// else scans the collection. A partial index is used only by a query whose
// predicates imply its filter (equalities, $in, ranges, $exists: true and
// $and of those). Candidates are always checked against the full
// filter, so an index only has to find a superset; values whose matching
// reaches beyond equal keys (null, arrays, regexes) are scanned, and range
// bounds on a multikey index are not intersected.
//
// A sorted find walks an index instead of sorting when the sort's fields
// are the index's first fields, all in the index's directions or all
// opposite (then the walk goes backward), and the index holds one entry
// per document (not multikey, sparse or partial); a limit stops the walk
// early. When the filter has an index predicate, the walk stays within it
// if it is on that index, and otherwise the filter's index wins and the
// matches are sorted. Documents that tie on the sort's fields come in
// natural order, as from a stable sort. Other sorts use mql's SortDocs, or,
// for a limit up to 2000, keep only the top documents in a heap while
// scanning. Explain reports the index used, whether it gave the order
// (and in which direction), and the keys and documents examined. createIndexes and loading a snapshot build an index by sorting
// all its keys at once.
//
// # Durability
//
// With Config.Dir set, every write command appends its oplog entries to a
// journal with a single write(2) while it holds the write lock, before it is
// acknowledged: an acknowledged write survives the process being killed. A
// goroutine owned by the Store fsyncs the journal every 100 ms (like
// MongoDB's journal commit interval) and on Close, so a power loss costs at
// most that window. A writer that needs more (the server, for a write
// concern that asks for the journal) calls WaitDurable after its write:
// it returns once the journal is fsynced past that write, and writers that
// wait at the same time share one fsync (group commit: the first to come
// fsyncs everything written so far, the others queue behind it and find
// their bytes covered). Each record carries a CRC-32C; a torn record at the
// end of the journal (a crash during a write, never acknowledged as
// durable) is cut off with a warning when the store opens. Config.FS is the
// seam the power-cut tests use (faultfs): they cut the power at every file
// operation of a workload and check that the store reopens with a prefix
// of the writes that holds every one WaitDurable acknowledged.
//
// The journal is the oplog itself: each entry holds what is needed to redo
// the write (inserted document, post-image of an update, document key of a
// delete, DDL details). Opening replays the journal onto the last snapshot.
// When the journal outgrows the last snapshot (and 64 MiB), the syncer
// compacts: under the write lock it captures the state (slice headers
// only), fsyncs the journal (only the newest journal may end torn) and
// switches to a new journal generation, then, without the lock,
// writes a snapshot of the documents, indexes and retained oplog entries to
// a temporary file, syncs it, renames it into place, syncs the directory
// and deletes the journals the snapshot covers. A crash at any point leaves
// either the old snapshot and every journal since, or the new one. The
// oplog is therefore durable with the data, within its bound, and the
// replica set id is kept in every snapshot and journal header.
//
// # Oplog
//
// Every write appends, under the write lock, one entry per document written
// (insertMany, updateMany and deleteMany give one entry each, in order) and
// one per DDL effect (dropDatabase records a drop per collection, then
// itself). Each entry takes the next cluster time: the current second with
// an increment.
//
// An update's UpdateDescription is built as MongoDB 7.0 builds it, from a
// diff tree shaped like its $v:2 delta oplog entry (diff.go, updatelog.go).
// A modifier-style update logs the paths its operators wrote, applied in
// field order: a changed path is reported with its whole new value (a
// $set of {a: {b: 1, c: 2}} reports a, not a.b), a created path at its
// first missing component, $unset as a removed field, $rename as both;
// $push appending to a non-empty array reports each new element as
// "arr.N", while $pop, $pull, $pullAll, $addToSet and other $push forms
// report the array whole; $[] and $[id] matching several elements report
// the one modified element, or the array when several changed. A
// pipeline-style update is described by MongoDB's document diff, with its
// size rule: a diff not smaller than the value it describes gives way to
// the value, and when that holds for the whole document the write is
// recorded as a replacement. Within a document, changed fields come first,
// then created ones, then removed ones, then changes further down. An
// update that changes nothing writes no entry and is not counted as
// modified. With changeStreamPreAndPostImages enabled, updates,
// replacements and deletes keep the pre-image in the entry. A rename to
// another database copies the collection into a temporary one there
// (create, createIndexes, inserts), renames it onto the target and drops
// the source, so the collection gets a new UUID, as in MongoDB.
//
// The oplog is bounded by Config.OplogBytes (256 MiB by default): each entry
// is charged its documents plus a fixed overhead for the structure, and the
// oldest entries are dropped first, unless they are younger than
// Config.OplogMinRetention. Entries live in fixed-size chunks, so the
// memory kept follows the retained entries. Readers call ReadAfter with the
// last time they saw (binary search) and wait on Changed, a channel closed
// and replaced by every append; ReadAfter reports lost when entries after
// the given time were already dropped.
package store
