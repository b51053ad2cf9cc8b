package mongowire

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Multi-document transactions, as mongod runs them on a replica set: a
// command carrying lsid, txnNumber and autocommit: false is a statement of
// the session's transaction number txnNumber, the first one with
// startTransaction: true. The storage side (isolation, conflicts, atomic
// commit) is store.Txn; this file keeps each session's transaction state,
// checks the protocol and routes the statements' reads and writes to the
// transaction.

// defaultTxnLifetime is transactionLifetimeLimitSeconds' default.
const defaultTxnLifetime = 60 * time.Second

// txnAllowed are the commands a transaction may run, as in mongod 7.0
// (less createIndexes, and create only without options).
var txnAllowed = map[string]bool{
	"find": true, "getMore": true, "killCursors": true, "insert": true, "update": true,
	"delete": true, "findAndModify": true, "aggregate": true, "distinct": true,
	"commitTransaction": true, "abortTransaction": true, "create": true,
	"createIndexes": true, // on a collection the transaction creates (store.Txn.CreateIndexes)
}

type txnPhase int

const (
	txnNone txnPhase = iota
	txnActive
	txnCommitted
	txnAborted
)

func (p txnPhase) String() string {
	return [...]string{"None", "InProgress", "Committed", "Aborted"}[p]
}

// txnSession is one logical session's transaction state.
type txnSession struct {
	mu     sync.Mutex // held for a whole statement; guards the fields below
	number int64      // the newest transaction number started
	phase  txnPhase
	txn    *store.Txn
	timer  *time.Timer // aborts the transaction at its lifetime limit
	reply  bson.D      // the commit's reply, for a retried commit
	used   time.Time
}

type txnTable struct {
	mu       sync.Mutex // guards the fields below
	sessions map[sessionKey]*txnSession
}

func (t *txnTable) get(key sessionKey) *txnSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessions == nil {
		t.sessions = make(map[sessionKey]*txnSession)
	}
	now := time.Now()
	for k, ts := range t.sessions { // forget idle sessions, as the retryable-write table does
		if ts.mu.TryLock() {
			if ts.phase != txnActive && now.Sub(ts.used) > sessionTimeout {
				delete(t.sessions, k)
			}
			ts.mu.Unlock()
		}
		break // one per call keeps this cheap; idle sessions go in time
	}
	ts, ok := t.sessions[key]
	if !ok {
		ts = &txnSession{number: -1}
		t.sessions[key] = ts
	}
	return ts
}

// abortSessions aborts the transactions in progress of the sessions
// match selects, and forgets those sessions.
func (t *txnTable) abortSessions(match func(sessionKey) bool) {
	t.mu.Lock()
	var hit []*txnSession
	for k, ts := range t.sessions {
		if match(k) {
			hit = append(hit, ts)
			delete(t.sessions, k)
		}
	}
	t.mu.Unlock()
	for _, ts := range hit {
		ts.mu.Lock()
		ts.abort()
		ts.mu.Unlock()
	}
}

// abort aborts the transaction in progress, if any. The caller holds mu.
func (ts *txnSession) abort() {
	if ts.phase != txnActive {
		return
	}
	ts.txn.Abort()
	ts.end(txnAborted)
}

func (ts *txnSession) end(p txnPhase) {
	ts.phase = p
	if ts.timer != nil {
		ts.timer.Stop()
		ts.timer = nil
	}
	if p == txnAborted {
		ts.txn = nil
	}
}

type txnKey struct{}

// txnFrom returns the transaction a statement runs in, or nil.
func txnFrom(ctx context.Context) *store.Txn {
	x, _ := ctx.Value(txnKey{}).(*store.Txn)
	return x
}

// txnLifetime returns transactionLifetimeLimitSeconds.
func (s *Server) txnLifetime() time.Duration {
	if s.cfg.TransactionLifetimeLimit > 0 {
		return s.cfg.TransactionLifetimeLimit
	}
	return defaultTxnLifetime
}

// inTransaction reports whether cmd is a statement of a transaction.
func inTransaction(cmd bson.Raw) bool {
	_, err := cmd.LookupErr("autocommit")
	return err == nil
}

// checkTxnNumber refuses a txnNumber on a command outside a transaction
// that is not a retryable write, as mongod does.
func checkTxnNumber(r *request, retryable bool) error {
	if _, err := r.cmd.LookupErr("startTransaction"); err == nil {
		return mongoerr.New(mongoerr.InvalidOptions, "'startTransaction' requires 'autocommit' to be false")
	}
	if _, err := r.cmd.LookupErr("txnNumber"); err != nil || retryable {
		return nil
	}
	return mongoerr.New(50768,
		"txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and %s is not a retryable write command.", r.name)
}

// runInTransaction runs one statement of a transaction.
func (s *Server) runInTransaction(ctx context.Context, c *conn, r *request, cmd command) ([]byte, error) {
	reply, err := s.txnStatement(ctx, c, r, cmd)
	switch {
	case errors.Is(err, errCloseConn):
		return nil, err
	case err != nil:
		return s.errorReply(err), nil
	}
	return s.okReply(reply), nil
}

func (s *Server) txnStatement(ctx context.Context, c *conn, r *request, cmd command) (bson.D, error) {
	ac := r.cmd.Lookup("autocommit")
	if b, ok := ac.BooleanOK(); !ok || b {
		if !ok {
			return nil, typeMismatch(r.name, "autocommit", ac, "bool")
		}
		return nil, mongoerr.New(mongoerr.InvalidOptions, "autocommit:true is not supported")
	}
	key, ok := s.sessionOf(c, r.cmd)
	if !ok {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Transactions require a session: the command has autocommit but no lsid")
	}
	nv, err := r.cmd.LookupErr("txnNumber")
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "'autocommit' and 'startTransaction' require a txnNumber")
	}
	number, ok := nv.Int64OK()
	if !ok {
		return nil, typeMismatch(r.name, "txnNumber", nv, "long")
	}
	if !txnAllowed[r.name] {
		return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "Cannot run '%s' in a multi-document transaction.", r.name)
	}
	if err := refuseInTransaction(r); err != nil {
		return nil, err
	}
	start := false
	if v, err := r.cmd.LookupErr("startTransaction"); err == nil {
		if b, ok := v.BooleanOK(); !ok || !b {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "specifying startTransaction=false is not allowed")
		}
		start = true
	}
	ts := s.txns.get(key)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.used = time.Now()
	if start {
		if err := s.startTxn(ts, r, number); err != nil {
			return nil, err
		}
	} else if err := ts.check(r, number); err != nil {
		return nil, err
	}
	switch r.name {
	case "commitTransaction":
		return s.commitTxn(ts, r, number)
	case "abortTransaction":
		ts.abort()
		return bson.D{}, nil
	}
	if _, err := r.cmd.LookupErr("writeConcern"); err == nil {
		ts.abort()
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Cannot set write concern after starting a transaction.")
	}
	x := ts.txn
	run := cmd.run
	if r.name == "create" {
		run = s.createInTxn
	}
	reply, err := s.call(context.WithValue(ctx, txnKey{}, x), c, r, run)
	if err == nil {
		err = statementFailure(reply)
		if err == nil && len(reply) > 0 && hasWriteErrors(reply) {
			ts.abort() // the transaction is aborted; the statement's reply says why
			return reply, nil
		}
	}
	if err != nil {
		ts.abort()
		if e, ok := mongoerr.As(err); ok && (e.Code == mongoerr.WriteConflict || e.Code == mongoerr.NoSuchTransaction) {
			e.WithLabels(mongoerr.LabelTransient)
		}
		return nil, err
	}
	return reply, nil
}

// refuseInTransaction refuses what mongod refuses inside a transaction
// among the commands it allows: a pipeline that writes or watches.
func refuseInTransaction(r *request) error {
	if r.name != "aggregate" {
		return nil
	}
	arr, ok := r.cmd.Lookup("pipeline").ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if first, err := d.IndexErr(0); err == nil {
			switch first.Key() {
			case "$out", "$merge", "$changeStream":
				return mongoerr.New(mongoerr.OperationNotSupportedInTransaction, "%s cannot be used in a transaction", first.Key())
			}
		}
	}
	return nil
}

// startTxn starts transaction number on the session, aborting an older
// one in progress.
func (s *Server) startTxn(ts *txnSession, r *request, number int64) error {
	switch {
	case number < ts.number:
		return mongoerr.New(mongoerr.TransactionTooOld,
			"Cannot start transaction %d on session because a newer transaction %d has already started.", number, ts.number)
	case number == ts.number && ts.phase != txnNone:
		return mongoerr.New(50911,
			"Cannot start a transaction at given transaction number %d a transaction with the same number is in state %s", number, ts.phase)
	}
	if err := checkTxnReadConcern(r.cmd); err != nil {
		return err
	}
	ts.abort()
	lsid, _ := r.cmd.Lookup("lsid").DocumentOK()
	x, err := s.rawStore.Begin(lsid, number)
	if err != nil {
		return err
	}
	ts.number, ts.phase, ts.txn, ts.reply = number, txnActive, x, nil
	ts.timer = time.AfterFunc(s.txnLifetime(), func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.txn == x && ts.phase == txnActive {
			s.log.Info("aborting a transaction that exceeded transactionLifetimeLimitSeconds", "txnNumber", number)
			ts.abort()
		}
	})
	return nil
}

// checkTxnReadConcern accepts the read concerns a transaction may start
// with: every read in one is from its snapshot.
func checkTxnReadConcern(cmd bson.Raw) error {
	rc, ok := cmd.Lookup("readConcern").DocumentOK()
	if !ok {
		return nil
	}
	if _, err := rc.LookupErr("atClusterTime"); err == nil {
		return mongoerr.New(mongoerr.InvalidOptions, "readConcern atClusterTime is not supported in a transaction by this server: a transaction reads at the time it starts")
	}
	if _, err := rc.LookupErr("afterClusterTime"); err == nil {
		return nil // every committed write is already visible
	}
	switch lv := rc.Lookup("level"); lv.StringValue() {
	case "", "local", "majority", "snapshot":
		if lv.Type != 0 && lv.Type != bson.TypeString {
			return typeMismatch("readConcern", "level", lv, "string")
		}
		return nil
	default:
		return mongoerr.New(mongoerr.InvalidOptions, "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction")
	}
}

// check validates a statement that continues transaction number.
func (ts *txnSession) check(r *request, number int64) error {
	if number != ts.number || ts.phase == txnNone {
		return mongoerr.New(mongoerr.NoSuchTransaction,
			"Given transaction number %d does not match any in-progress transactions. The active transaction number is %d", number, ts.number).
			WithLabels(mongoerr.LabelTransient)
	}
	if ts.phase == txnActive {
		if err := ts.txn.Err(); err != nil { // aborted by the store (a conflict, a DDL command)
			ts.end(txnAborted)
		}
	}
	switch ts.phase {
	case txnAborted:
		return mongoerr.New(mongoerr.NoSuchTransaction, "Transaction with { txnNumber: %d } has been aborted.", number).
			WithLabels(mongoerr.LabelTransient)
	case txnCommitted:
		if r.name == "commitTransaction" {
			return nil
		}
		return mongoerr.New(mongoerr.TransactionCommitted, "Transaction %d has been committed.", number)
	}
	if _, err := r.cmd.LookupErr("readConcern"); err == nil {
		return mongoerr.New(mongoerr.InvalidOptions, "Only the first command in a transaction may specify a readConcern")
	}
	return nil
}

// commitTxn commits, or answers a retried commit of a committed one.
func (s *Server) commitTxn(ts *txnSession, r *request, number int64) (bson.D, error) {
	if ts.phase == txnActive {
		if _, err := ts.txn.Commit(); err != nil {
			ts.end(txnAborted)
			if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.NoSuchTransaction {
				return nil, err
			}
			// The journal failed: the outcome is known here (aborted), but
			// a client may retry the commit and learn it.
			return nil, asMongoErr(err).WithLabels(mongoerr.LabelUnknownCommit)
		}
		ts.end(txnCommitted)
	}
	if journaled(r.cmd) {
		if err := s.rawStore.WaitDurable(); err != nil {
			return nil, asMongoErr(err).WithLabels(mongoerr.LabelUnknownCommit)
		}
	}
	reply := bson.D{}
	if wce := writeConcernError(r.cmd); wce != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: wce})
	}
	return reply, nil
}

// statementFailure returns the error a statement's writeErrors hold that
// mongod answers as a command error in a transaction: a write conflict.
func statementFailure(reply bson.D) error {
	for _, e := range reply {
		if e.Key != "writeErrors" {
			continue
		}
		arr, _ := e.Value.(bson.A)
		for _, we := range arr {
			d, _ := we.(bson.D)
			for _, f := range d {
				if f.Key == "code" {
					if code, _ := f.Value.(int32); code == mongoerr.WriteConflict || code == mongoerr.NoSuchTransaction {
						var msg string
						for _, g := range d {
							if g.Key == "errmsg" {
								msg, _ = g.Value.(string)
							}
						}
						return mongoerr.New(code, "%s", msg).WithLabels(mongoerr.LabelTransient)
					}
				}
			}
		}
	}
	return nil
}

func hasWriteErrors(reply bson.D) bool {
	for _, e := range reply {
		if e.Key == "writeErrors" {
			return true
		}
	}
	return false
}

// closeTransactions aborts every transaction in progress, at Close.
func (s *Server) closeTransactions() { s.txns.abortSessions(anySession) }

func (s *Server) cmdCommitTransaction(context.Context, *conn, *request) (bson.D, error) {
	return nil, mongoerr.New(mongoerr.InvalidOptions, "commitTransaction must be run within a transaction: it needs lsid, txnNumber and autocommit: false")
}

func (s *Server) cmdAbortTransaction(context.Context, *conn, *request) (bson.D, error) {
	return nil, mongoerr.New(mongoerr.InvalidOptions, "abortTransaction must be run within a transaction: it needs lsid, txnNumber and autocommit: false")
}

// transientCodes get the TransientTransactionError label on a statement
// of a transaction when a fail point names no labels, as mongod labels
// them: write conflicts, lock timeouts, snapshot errors, NoSuchTransaction.
var transientCodes = map[int32]bool{
	mongoerr.WriteConflict: true, 24: true, 239: true, 246: true, mongoerr.NoSuchTransaction: true,
	267: true, // PreparedTransactionInProgress
}

// notPrimaryCodes say the node stopped being primary.
var notPrimaryCodes = map[int32]bool{
	mongoerr.NotWritablePrimary: true, mongoerr.NotPrimaryNoSecondaryOk: true, 11602: true, 189: true,
}

// defaultLabels are the labels mongod puts on the error a fail point
// injects when the fail point names none: RetryableWriteError on a
// retryable write (commitTransaction and abortTransaction are ones) for
// its retryable codes, TransientTransactionError in a transaction for
// the transient codes. On a commit or abort, NoSuchTransaction is
// transient only without a write concern error: with one, the commit may
// have happened and may not be redone.
func (a failAction) defaultLabels() []string {
	var labels []string
	if a.retryableWrite && retryableCodes[a.errorCode] {
		labels = append(labels, "RetryableWriteError")
	}
	end := a.retryableWrite && (a.name == "commitTransaction" || a.name == "abortTransaction")
	switch {
	case a.txnStatement && notPrimaryCodes[a.errorCode]:
		// A statement that met a primary stepping down: the transaction
		// is gone with it and may be run again whole.
		labels = append(labels, mongoerr.LabelTransient)
	case !a.txnStatement && !end, !transientCodes[a.errorCode]:
	case end && a.errorCode == mongoerr.NoSuchTransaction && a.writeConcernErr != nil:
	default:
		labels = append(labels, mongoerr.LabelTransient)
	}
	return labels
}

// inTransaction adjusts a fail point's action for a statement of a
// transaction: only its commit and abort are retryable writes, the other
// statements' errors may be transient.
func (a failAction) inTransaction(r *request) failAction {
	if !inTransaction(r.cmd) {
		return a
	}
	end := r.name == "commitTransaction" || r.name == "abortTransaction"
	a.retryableWrite = end
	a.txnStatement = !end
	return a
}

// createInTxn creates a collection in the transaction; options are
// refused, as mongod refuses a capped collection or a view in one.
func (s *Server) createInTxn(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	name, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok {
		return nil, typeMismatch("create", "create", r.cmd.Index(0).Value(), "string")
	}
	elems, _ := r.cmd.Elements()
	for _, e := range elems[1:] {
		if !isGenericField(e.Key()) {
			return nil, mongoerr.New(mongoerr.OperationNotSupportedInTransaction,
				"Cannot run 'create' with option '%s' in a multi-document transaction on this server.", e.Key())
		}
	}
	if err := txnFrom(ctx).Create(store.Namespace{DB: r.db, Coll: name}); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}
