package mongowire

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	netconn "github.com/tide-cdc/tide/mongowire/internal/conn"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Authentication: SCRAM-SHA-1 and SCRAM-SHA-256 through saslStart and
// saslContinue, or speculatively inside the handshake's hello. The
// conversation itself (mechanisms, payloads, conversation ids, the SCRAM
// steps) is internal/conn's SASL; this file gives it the users'
// credentials, makes the user it returns the connection's, turns every
// failure into mongod's AuthenticationFailed (the client learns only that
// it failed, not why), and slows and finally disconnects a client that
// keeps failing.

// Failure reasons, the label of tide_mongowire_auth_failures_total.
const (
	reasonUnknownUser   = netconn.ReasonUnknownUser
	reasonWrongPassword = netconn.ReasonWrongPassword
	reasonMechanism     = netconn.ReasonMechanism
	reasonMalformed     = netconn.ReasonMalformed
)

var authFailedErr = mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.")

// connAuth is a connection's authentication: who it is, what it may do
// (computed at authentication, recomputed only when users change), and
// the conversation in progress. Only the connection's goroutine uses it.
type connAuth struct {
	user     *authUser
	privs    *privileges
	gen      uint64 // the users generation privs were computed at
	sasl     netconn.SASL[*authUser]
	failures int  // failed authentications on this connection
	closing  bool // close the connection once this reply is sent
}

// authCounters are the server's authentication counters.
type authCounters struct {
	successes atomic.Int64
	closed    atomic.Int64 // connections closed for too many failures

	mu         sync.Mutex // guards the fields below
	byReason   map[string]int64
	byUser     map[string]int64   // total failures per existing user ("db.user")
	streak     map[string]int     // consecutive failures per existing user, reset by a success
	addrStreak map[netip.Addr]int // consecutive failures per client address, reset by a success from it; at most maxAddrStreaks
}

// maxAddrStreaks bounds the addresses whose failures are remembered, so
// that a client with very many addresses cannot grow the map: past it, a
// new address pushes out an arbitrary one.
const maxAddrStreaks = 10000

// AuthStats are the authentication counters of a Server.
type AuthStats struct {
	Successes int64
	// Failures counts failed authentications by reason: unknown_user,
	// wrong_password, mechanism_unavailable, malformed.
	Failures map[string]int64
	// UserFailures counts failures per existing user, as "db.user";
	// attempts on unknown users are counted only by reason, so that
	// guessing names cannot grow this map.
	UserFailures map[string]int64
	// ClosedConnections counts connections closed after
	// Config.AuthFailureLimit failures.
	ClosedConnections int64
}

// AuthStats returns a snapshot of the authentication counters.
func (s *Server) AuthStats() AuthStats {
	c := &s.auth.stats
	st := AuthStats{Successes: c.successes.Load(), ClosedConnections: c.closed.Load(), Failures: map[string]int64{}, UserFailures: map[string]int64{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.byReason {
		st.Failures[k] = v
	}
	for k, v := range c.byUser {
		st.UserFailures[k] = v
	}
	return st
}

// saslStart begins a conversation in db from {saslStart|mechanism, payload,
// options}. It returns the reply fields, or the failure to report.
func (s *Server) saslStart(c *conn, db string, cmd bson.Raw, speculative bool) (bson.D, error) {
	skipEmpty := false
	if v, err := cmd.LookupErr("options", "skipEmptyExchange"); err == nil {
		skipEmpty = truthy(v)
	}
	reply, err := c.auth.sasl.Start(db, cmd, skipEmpty, s.credentials)
	if err != nil {
		return nil, s.saslFailed(c, err, speculative)
	}
	return reply, nil
}

// credentials gives a conversation the stored keys of a user.
func (s *Server) credentials(db, user, mech string) (scram.StoredCredentials, *authUser, bool) {
	u := s.lookupUser(db, user)
	if u == nil {
		return scram.StoredCredentials{}, nil, false
	}
	cred, ok := u.Creds[mech]
	return cred, u, ok
}

// saslContinue advances the conversation conversationId.
func (s *Server) saslContinue(c *conn, db string, cmd bson.Raw) (bson.D, error) {
	reply, done, u, err := c.auth.sasl.Continue(db, cmd)
	if err != nil {
		return nil, s.saslFailed(c, err, false)
	}
	if done {
		s.authenticated(c, u)
	}
	return reply, nil
}

// saslFailed counts a failed step (authFailed) and returns the error for
// the client.
func (s *Server) saslFailed(c *conn, err error, speculative bool) error {
	var f *netconn.Failure[*authUser]
	if !errors.As(err, &f) {
		return err // our bug: an InternalError
	}
	authErr := s.authFailed(c, f.User, f.Reason, f.Detail, speculative)
	if f.Err != nil {
		return f.Err
	}
	return authErr
}

// authenticated makes u the connection's user.
func (s *Server) authenticated(c *conn, u *authUser) {
	c.auth.user = u
	c.auth.gen = s.auth.gen.Load()
	c.auth.privs = compilePrivileges(u.Roles)
	c.auth.failures = 0
	s.auth.stats.successes.Add(1)
	st := &s.auth.stats
	st.mu.Lock()
	delete(st.streak, u.ID)
	delete(st.addrStreak, c.ip)
	st.mu.Unlock()
	c.log.Debug("authenticated", "user", u.User, "db", u.DB)
}

// authFailed counts one failure, waits the growing pause it has earned
// (by the consecutive failures of the connection, of the user, or of the
// client's address, whichever has most: a client that opens a connection
// per guess, or guesses names, waits as long as one that does neither),
// marks the connection for closing past the limit, and returns the error
// the client gets (detail, if any, goes to the log only). A failed
// speculative attempt is not counted: the driver then authenticates
// normally, and that attempt counts.
func (s *Server) authFailed(c *conn, u *authUser, reason, detail string, speculative bool) error {
	if speculative {
		return authFailedErr
	}
	st := &s.auth.stats
	st.mu.Lock()
	if st.byReason == nil {
		st.byReason, st.byUser, st.streak, st.addrStreak = map[string]int64{}, map[string]int64{}, map[string]int{}, map[netip.Addr]int{}
	}
	st.byReason[reason]++
	streak := 0
	if u != nil && s.lookupUser(u.DB, u.User) != nil {
		st.byUser[u.ID]++
		st.streak[u.ID]++
		streak = st.streak[u.ID]
	}
	if c.ip.IsValid() {
		if _, ok := st.addrStreak[c.ip]; !ok && len(st.addrStreak) >= maxAddrStreaks {
			for a := range st.addrStreak {
				delete(st.addrStreak, a)
				break
			}
		}
		st.addrStreak[c.ip]++
		streak = max(streak, st.addrStreak[c.ip])
	}
	st.mu.Unlock()
	c.auth.failures++
	if detail != "" {
		c.log.Info("authentication failed", "reason", reason, "detail", detail, "failures", c.auth.failures)
	} else {
		c.log.Info("authentication failed", "reason", reason, "failures", c.auth.failures)
	}
	if d := s.failureDelay(max(c.auth.failures, streak)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.done:
			t.Stop()
		}
	}
	if c.auth.failures >= s.cfg.AuthFailureLimit {
		c.auth.closing = true
		st.closed.Add(1)
		c.log.Warn("closing connection: too many failed authentications", "failures", c.auth.failures)
	}
	return authFailedErr
}

// failureDelay is the pause before answering the n-th consecutive failure:
// none for the first two, then AuthFailureDelay doubling up to
// AuthFailureMaxDelay.
func (s *Server) failureDelay(n int) time.Duration {
	if n <= 2 || s.cfg.AuthFailureDelay <= 0 {
		return 0
	}
	d := s.cfg.AuthFailureDelay
	for i := 3; i < n && d < s.cfg.AuthFailureMaxDelay; i++ {
		d *= 2
	}
	return min(d, s.cfg.AuthFailureMaxDelay)
}

func (s *Server) cmdSaslStart(_ context.Context, c *conn, r *request) (bson.D, error) {
	return s.saslStart(c, r.db, r.cmd, false)
}

func (s *Server) cmdSaslContinue(_ context.Context, c *conn, r *request) (bson.D, error) {
	return s.saslContinue(c, r.db, r.cmd)
}

// cmdAuthenticate is the command of MONGODB-X509 (and the long-gone
// MONGODB-CR): mechanisms this server does not offer.
func (s *Server) cmdAuthenticate(_ context.Context, c *conn, r *request) (bson.D, error) {
	mech, _ := r.cmd.Lookup("mechanism").StringValueOK()
	s.authFailed(c, nil, reasonMechanism, "", false)
	return nil, mongoerr.New(mongoerr.MechanismUnavailable, "Received authentication for mechanism %s which is unknown or not enabled", mech)
}

// cmdLogout forgets the connection's user.
func (s *Server) cmdLogout(_ context.Context, c *conn, _ *request) (bson.D, error) {
	c.auth.user, c.auth.privs = nil, nil
	c.auth.sasl.Reset()
	return bson.D{}, nil
}

// speculative answers hello's speculativeAuthenticate: the first step of
// a SCRAM conversation, saving the client a round trip. A failure only
// leaves the field out of the reply; the driver then runs saslStart.
func (s *Server) speculative(c *conn, doc bson.Raw) bson.D {
	if c == nil {
		return nil
	}
	if _, err := doc.LookupErr("saslStart"); err != nil {
		return nil
	}
	db, ok := doc.Lookup("db").StringValueOK()
	if !ok {
		return nil
	}
	reply, err := s.saslStart(c, db, doc, true)
	if err != nil {
		return nil
	}
	return reply
}

// supportedMechs answers hello's saslSupportedMechs: "db.user".
func (s *Server) supportedMechs(v bson.RawValue) bson.A {
	name, ok := v.StringValueOK()
	if !ok {
		return nil
	}
	db, user, ok := strings.Cut(name, ".")
	if !ok {
		return nil
	}
	u := s.lookupUser(db, user)
	if u == nil {
		return nil
	}
	out := bson.A{}
	for _, m := range u.mechanisms() {
		out = append(out, m)
	}
	return out
}
