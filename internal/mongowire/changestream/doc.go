// Package changestream implements MongoDB change streams for the embedded
// server: resume tokens (the server's KeyString layout, so that tokens
// compare as their hex strings do), the $changeStream stage and its
// options, the event documents built from the store's oplog, and the
// stream that a change-stream cursor reads from.
//
// It follows MongoDB 7.0 (mongo-reference.md §3): field order, error codes
// and labels are the server's, so that drivers and mongosh, including their
// automatic resume, cannot tell the difference.
package changestream
