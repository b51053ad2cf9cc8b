package mongowire

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// sessionTimeout is logicalSessionTimeoutMinutes: a session unused this
// long is forgotten, with its retryable-write record.
const sessionTimeout = 30 * time.Minute

// session remembers the last retryable write of one logical session, so
// that a driver retrying (lsid, txnNumber) gets the first reply instead of
// a second execution.
type session struct {
	mu      sync.Mutex // held for the whole of a write, guards the fields below
	txn     int64
	reply   bson.D // the stored reply of txn; nil while none succeeded
	lastUse time.Time
}

type sessionTable struct {
	mu        sync.Mutex // guards the fields below
	sessions  map[string]*session
	lastSweep time.Time
}

func (t *sessionTable) init() { t.sessions = make(map[string]*session) }

// lsidKey returns the session id's bytes from {lsid: {id: UUID, ...}}.
func lsidKey(cmd bson.Raw) (string, bool) {
	v, err := cmd.LookupErr("lsid", "id")
	if err != nil {
		return "", false
	}
	_, data, ok := v.BinaryOK()
	if !ok {
		return "", false
	}
	return string(data), true
}

// forWrite returns the session and txnNumber of a retryable write, if the
// command carries both.
func (t *sessionTable) forWrite(cmd bson.Raw) (*session, int64, bool) {
	v, err := cmd.LookupErr("txnNumber")
	if err != nil {
		return nil, 0, false
	}
	txn, ok := v.Int64OK()
	if !ok {
		return nil, 0, false
	}
	key, ok := lsidKey(cmd)
	if !ok {
		return nil, 0, false
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.lastSweep) > time.Minute {
		t.lastSweep = now
		for k, s := range t.sessions {
			if s.mu.TryLock() {
				if now.Sub(s.lastUse) > sessionTimeout {
					delete(t.sessions, k)
				}
				s.mu.Unlock()
			}
		}
	}
	s, ok := t.sessions[key]
	if !ok {
		s = &session{txn: -1}
		t.sessions[key] = s
	}
	return s, txn, true
}

// end forgets the sessions named by ids ([{id: UUID}]).
func (t *sessionTable) end(ids bson.RawArray) {
	vals, _ := ids.Values()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if _, data, ok := d.Lookup("id").BinaryOK(); ok {
			delete(t.sessions, string(data))
		}
	}
}

func (t *sessionTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.sessions)
}

// runRetryable runs a retryable write once per (lsid, txnNumber): a
// retry of the last txnNumber gets the stored reply, an older one is
// refused. The session's lock makes a retry wait for a first attempt that
// is still running.
// executed reports whether the session's retryable write txn ran.
func (sess *session) executed(txn int64) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return txn == sess.txn && sess.reply != nil
}

func (s *Server) runRetryable(ctx context.Context, c *conn, r *request, cmd command, sess *session, txn int64) ([]byte, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.lastUse = time.Now()
	switch {
	case txn < sess.txn:
		return s.errorReply(mongoerr.New(mongoerr.TransactionTooOld,
			"Retryable write with txnNumber %d is prohibited on session because a newer retryable write with txnNumber %d has already started on this session.", txn, sess.txn)), nil
	case txn == sess.txn && sess.reply != nil:
		return s.okReply(append(bson.D(nil), sess.reply...)), nil
	}
	reply, err := s.call(ctx, c, r, cmd.run)
	switch {
	case errors.Is(err, errCloseConn):
		return nil, err
	case err != nil:
		return s.errorReply(err), nil
	}
	sess.txn = txn
	sess.reply = reply
	return s.okReply(append(bson.D(nil), reply...)), nil
}
