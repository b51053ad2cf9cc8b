// Package store is the storage engine of the embedded MongoDB-compatible
// server: databases, collections, documents, indexes, durability and the
// oplog that records every write in commit order.
package store
