// Package mongowire is Tide's embedded MongoDB-compatible server: a real
// in-process document store that speaks the MongoDB wire protocol as a
// single-node replica set (rs0), with change streams. The official drivers
// and mongosh use it as they would use mongod 7.0, so a program or a test
// suite gets a MongoDB without installing or downloading one.
//
// # What it serves
//
// OP_MSG commands (and the legacy OP_QUERY handshake), with hardened
// framing: bounded message lengths, header, body and idle deadlines, a
// connection cap, and BSON depth checked before decoding. CRUD (find,
// insert, update, delete, findAndModify, count, distinct), indexes
// (unique, compound, multikey, partial), cursors with getMore and
// killCursors, retryable writes, a query language subset (filters,
// updates, projection, sort and a useful part of aggregation, $lookup,
// $facet, $out and $merge included), collection and database
// administration, and hello, replSetGetConfig and replSetGetStatus
// answers of a one-member replica set. Change streams have real resume
// tokens, post-batch resume tokens, invalidate, resumeAfter and
// startAfter, full-document and pre- and post-image modes, over an oplog
// bounded in bytes (Config.OplogBytes). With Config.DataDir the data and
// the oplog survive a restart, and journaled writes are acknowledged only
// after an fsync covers them; without it everything is in memory.
//
// Multi-document transactions work as on a replica set: statements
// carrying lsid, txnNumber and autocommit: false (startTransaction on the
// first) run under snapshot isolation, a write conflicting with another
// open transaction fails with WriteConflict and the TransientTransactionError
// label, and commitTransaction applies every write atomically, at one
// cluster time, as one group of oplog entries. A transaction still open
// after Config.TransactionLifetimeLimit is aborted. A transaction runs
// find, getMore, killCursors, insert, update, delete, findAndModify,
// aggregate, distinct, create, and createIndexes on a collection it
// creates.
//
// What it refuses, with the error codes mongod uses: the commands, stages
// and operators it does not implement, each refused by name rather than
// ignored; custom roles and authentication mechanisms other than SCRAM.
// Compression is never advertised: a connection that sends OP_COMPRESSED,
// or a legacy opcode other than the OP_QUERY handshake, is closed.
//
// # Authentication
//
// With Config.Auth, clients authenticate with SCRAM-SHA-256 or SCRAM-SHA-1
// and every command is checked against the built-in roles of the user
// (read, readWrite, dbAdmin, userAdmin, the AnyDatabase roles,
// clusterMonitor, clusterManager, hostManager, clusterAdmin, root) before
// it runs. Users live in admin.system.users as salted keys, never
// passwords; Config.AdminUser creates the first one. Failed attempts are
// slowed, counted (AuthStats) and, past Config.AuthFailureLimit, end the
// connection. A session belongs to the user who runs it: listing other
// users' sessions needs the listSessions action, ending or killing them
// killAnySession. Connections that have not authenticated are bounded in
// time (Config.AuthTimeout) and in number
// (Config.MaxUnauthenticatedConnections), so that they never keep out a
// client that does; Config.MaxConnectionsPerIP bounds one address's
// connections, with or without Auth (ConnStats counts all three).
//
// # Use in tests
//
// Package mongowiretest starts an in-memory server on a free loopback port
// and closes it when the test ends, as net/http/httptest does for HTTP;
// it lives apart so that a program embedding the server does not link
// package testing:
//
//	func TestOrders(t *testing.T) {
//		srv := mongowiretest.StartTest(t)
//		client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
//		...
//	}
//
// mongowiretest.StartTestWith takes a Config, for example to enable
// configureFailPoint (Config.EnableTestCommands) or to keep the data in a
// directory. Outside tests, New configures a server, Start serves, Close
// stops it.
//
// # Layout
//
// The package holds the commands: dispatch, one file per command family
// (cmd_<family>.go), cursors, sessions, transactions and authorization.
// Below it, behind walls:
//
//   - internal/conn is the connection layer: the listener, TLS, the
//     accept loop and connection cap, each connection's framing and
//     deadlines, and the SASL (SCRAM) conversation. It knows requests and
//     replies, not commands; conn.go is where a request crosses into
//     dispatch.
//   - Handlers reach the data through one door, Server.data (data.go):
//     inside a transaction, reads and writes go to the transaction. A
//     test fails if a handler reaches the store any other way.
//   - internal/wire parses and writes messages, internal/store keeps the
//     documents, indexes and oplog, internal/mql is the query language and
//     internal/changestream the change streams.
//
// # Stability
//
// The package is at v0: its API may change between releases, and changes
// are noted in the release notes. The wire behaviour follows mongod's and
// aims to change only towards it.
package mongowire
