// Package mongo is Tide's MongoDB change-stream source: it streams
// every change of one collection of a replica set or sharded cluster (or of
// the embedded server), once and in order, through the official driver.
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
package mongo
