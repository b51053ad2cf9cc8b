// Package changestream implements MongoDB change streams for the embedded
// server, following MongoDB 7.0 (mongo-reference.md §3) field by field and
// error code by error code, so that drivers and mongosh, including their
// automatic resume, cannot tell the difference.
//
// The pieces, in the order a change-stream aggregate meets them:
//
//   - Parse validates the pipeline: the $changeStream options, the
//     namespace rules of collection, database and cluster streams, the
//     start point, and the stages allowed to follow (with a final
//     $changeStreamSplitLargeEvent). It returns a Spec.
//   - Open positions a Stream at the Spec's start point on the store's
//     oplog: after the newest write, at startAtOperationTime, or at a
//     resume token (286 when that is older than the retained oplog).
//   - Stream.Next is the cursor source behind aggregate and getMore. It
//     reads oplog entries after its position, builds the event documents
//     (event.go), runs the user's stages on them, refuses pipelines that
//     change _id (280), splits or refuses events over 16 MiB, and returns
//     batches with a postBatchResumeToken. With nothing to return it waits
//     on the oplog's change channel, so a write wakes it at once; it starts
//     no goroutines.
//   - Token is a resume token in the server's KeyString layout (version
//     2), byte-exact with real MongoDB tokens for the common key types, so
//     that tokens compare as their hex strings do.
//   - LabelError adds the ResumableChangeStreamError or
//     NonResumableChangeStreamError label a failed change-stream command
//     carries.
package changestream
