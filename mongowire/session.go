package mongowire

import (
	"context"
	"crypto/sha256"
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
	sessions  map[sessionKey]*session
	lastSweep time.Time
}

func (t *sessionTable) init() { t.sessions = make(map[sessionKey]*session) }

// sessionKey names a logical session as mongod does: the id the client
// chose and the uid of the user who runs it, so that one id sent by two
// users names two sessions and no user reaches another's.
type sessionKey struct {
	uid [sha256.Size]byte
	id  string
}

// noAuthUID is the uid of every session when authentication is off:
// mongod's digest of nothing, which no "user@db" has.
var noAuthUID = sha256.Sum256(nil)

// userUID is mongod's uid of a user: the SHA-256 of "name@db".
func userUID(name, db string) [sha256.Size]byte {
	if name == "" && db == "" {
		return noAuthUID
	}
	return sha256.Sum256([]byte(name + "@" + db))
}

// callerUID is the uid of c's sessions: its user's with authentication
// on, noAuthUID with it off (as mongod, even for a user who
// authenticated).
func (s *Server) callerUID(c *conn) [sha256.Size]byte {
	if !s.cfg.Auth || c == nil || c.auth.user == nil {
		return noAuthUID
	}
	return userUID(c.auth.user.User, c.auth.user.DB)
}

// sessionOf returns the session a command's lsid names for c. It does
// not check an lsid's uid: checkSessionUID does, before the command runs.
func (s *Server) sessionOf(c *conn, cmd bson.Raw) (sessionKey, bool) {
	lsid, ok := cmd.Lookup("lsid").DocumentOK()
	if !ok {
		return sessionKey{}, false
	}
	_, id, ok := lsid.Lookup("id").BinaryOK()
	if !ok {
		return sessionKey{}, false
	}
	k := sessionKey{uid: s.callerUID(c), id: string(id)}
	if _, uid, ok := lsid.Lookup("uid").BinaryOK(); ok && len(uid) == sha256.Size {
		copy(k.uid[:], uid)
	}
	return k, true
}

// checkSessionUID refuses an lsid naming another user's session with its
// uid, as mongod: only the session's own user may name it that way
// (mongod's impersonate action, which no role here grants, aside).
func (s *Server) checkSessionUID(c *conn, cmd bson.Raw) error {
	uid, err := cmd.LookupErr("lsid", "uid")
	if err != nil || s.cfg.Auth && (c == nil || c.auth.user == nil) {
		return nil // without a user, the lsid is ignored (touchSession)
	}
	if !s.mayNameUID(c, uid, false) {
		return mongoerr.New(mongoerr.Unauthorized, "Unauthorized to set user digest in LogicalSessionId")
	}
	return nil
}

// mayNameUID reports whether c may name a session by uid: its own, or
// anyone's with killAny (killSessions) and the killAnySession action.
func (s *Server) mayNameUID(c *conn, uid bson.RawValue, killAny bool) bool {
	if !s.cfg.Auth {
		return true // every action is granted without authentication, as on mongod
	}
	_, data, ok := uid.BinaryOK()
	own := s.callerUID(c)
	if ok && string(data) == string(own[:]) {
		return true
	}
	return killAny && s.privilegesOf(c).onCluster(actKillAnySession)
}

// retryableSession returns the session of c and the txnNumber of a
// retryable write, if the command carries both.
func (s *Server) retryableSession(c *conn, cmd bson.Raw) (*session, int64, bool) {
	key, ok := s.sessionOf(c, cmd)
	if !ok {
		return nil, 0, false
	}
	return s.sessions.forWrite(key, cmd)
}

// forWrite returns the session key names and the txnNumber of a
// retryable write, if the command carries one.
func (t *sessionTable) forWrite(key sessionKey, cmd bson.Raw) (*session, int64, bool) {
	v, err := cmd.LookupErr("txnNumber")
	if err != nil {
		return nil, 0, false
	}
	txn, ok := v.Int64OK()
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

// end forgets the sessions match selects.
func (t *sessionTable) end(match func(sessionKey) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.sessions {
		if match(k) {
			delete(t.sessions, k)
		}
	}
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
