// Package mongo is Tide's MongoDB change-stream source: it streams
// every change of one collection of a replica set or sharded cluster (or of
// the embedded server), or of many collections through one database- or
// cluster-level stream, once and in order, through the official driver.
//
// Open admits the deployment and the collection (a replica set or sharded
// cluster; the collection exists, is a plain collection, and has pre- and
// post-images when a mode needs them), checks a restored checkpoint
// against the live identity, and opens the change stream. A fresh start
// opens it with batchSize 0 and takes the reply's postBatchResumeToken as
// the first position, so nothing before admission is replayed and nothing
// after it is missed. With snapshot "initial" it then copies the existing
// documents, in _id order, before streaming from that token.
//
// One reader goroutine owns the driver cursor and fills a queue bounded in
// bytes; Poll drains it without blocking. The reader converts nothing: it
// clones each change event once and hands out sub-slices of the clone, and
// the runtime's encode pool does the BSON to JSON work in parallel.
// Post-batch resume tokens seen while idle become marker events, so the
// checkpoint advances on an idle collection. Where the server supports it,
// the stream ends with $changeStreamSplitLargeEvent, and the reader joins
// the fragments of an event over 16 MiB into one event whose position is
// the last fragment's token (split.go); no marker is made in the middle of
// a split event. Network and resumable errors
// reopen the stream from the last position handed out, after checking the
// deployment and the collection again; lost history (286, 280) and other
// permanent errors stop the source with a message that says what to do.
//
// Positions are JSON:
//
//	{"resume_token": {"_data": "82..."}}        resume after this event
//	{"start_after_token": {"_data": "82..."}}   after an invalidate
//	{"snapshot": {"start_token": {...}, "last_id": <canonical Extended JSON or null>}}
//
// # Many collections
//
// With Config.Collections the source opens one change stream on the
// database (or, without Database, on the cluster) with a $match on ns
// built from the globs (filter.go), and showExpandedEvents, so that DDL
// arrives: a create of a matching collection adds it to the catalog, the
// set of captured collections and their UUIDs; drop, rename (capture
// follows the target if it matches) and dropDatabase remove them; all are
// delivered as events. With update_lookup, an update that comes without
// its document because the server looked it up after a rename is looked
// up again in the collection of its collectionUUID (lookupRenamed). The
// reader runs ahead of commits, so each position
// names the epoch of the catalog as of that position, and Identity stores
// catalog.<epoch> for every epoch a commit may still name (multi.go):
//
//	{"resume_token": {...}, "catalog": 3}
//	{"snapshot": {"start_token": {...}, "next": 2, "active": {"shop.b": <_id or null>}, "turn": "shop.b"}, "catalog": 0}
//
// On restart, a captured collection with another UUID now (dropped and
// re-created, or renamed over, while stopped) is accepted provisionally:
// the first event of its namespace that is not a change of the old
// collection must be its drop or rename (or its database's drop), or the
// pipeline stops before handing that event out, as it does when the
// stream catches up without one (checkReplaced); one that is gone must
// have its drop in the stream before the stream catches up. A filter
// that only narrows the checkpoint's (filter.narrows) is accepted with a
// log line; one that widens is refused. The initial snapshot
// copies the catalog's collections in name order, SnapshotParallelism at a
// time, from one start token; their documents reach the queue through the
// reader one at a time, in turn (one document of each active collection,
// in name order), so each position says which collections are done (those
// before next and not active), where each active one resumes, and whose
// turn is next: a restart hands out the same events and positions as the
// first run did, as for one collection (snapshot_multi.go).
package mongo
