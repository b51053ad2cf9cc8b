package mongowire

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Authentication: SCRAM-SHA-1 and SCRAM-SHA-256 through saslStart and
// saslContinue, or speculatively inside the handshake's hello. The SCRAM
// state machine is xdg-go/scram's; this file keeps one conversation per
// connection, turns every failure into mongod's AuthenticationFailed (the
// client learns only that it failed, not why), and slows and finally
// disconnects a client that keeps failing.

// maxSASLPayload bounds one SCRAM message: real ones are a few hundred bytes.
const maxSASLPayload = 8 << 10

// Failure reasons, the label of tide_mongowire_auth_failures_total.
const (
	reasonUnknownUser   = "unknown_user"
	reasonWrongPassword = "wrong_password"
	reasonMechanism     = "mechanism_unavailable"
	reasonMalformed     = "malformed"
)

var authFailedErr = mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.")

// connAuth is a connection's authentication: who it is, what it may do
// (computed at authentication, recomputed only when users change), and
// the conversation in progress. Only the connection's goroutine uses it.
type connAuth struct {
	user     *authUser
	privs    *privileges
	gen      uint64 // the users generation privs were computed at
	conv     *saslConv
	nextConv int32
	failures int  // failed authentications on this connection
	closing  bool // close the connection once this reply is sent
}

// saslConv is one SCRAM conversation.
type saslConv struct {
	id        int32
	mech, db  string
	scram     *scram.ServerConversation
	user      *authUser // once the first step named an existing user
	skipEmpty bool      // the client asked to skip the final empty exchange
	proven    bool      // the client's proof was valid; waiting for the empty exchange
}

// authCounters are the server's authentication counters.
type authCounters struct {
	successes atomic.Int64
	closed    atomic.Int64 // connections closed for too many failures

	mu       sync.Mutex // guards the fields below
	byReason map[string]int64
	byUser   map[string]int64 // total failures per existing user ("db.user")
	streak   map[string]int   // consecutive failures per existing user, reset by a success
}

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

// parseMechanism checks saslStart's mechanism: 334 for one this server
// does not offer (x.509, LDAP, Kerberos and the rest), as mongod.
func parseMechanism(v bson.RawValue) (string, error) {
	mech, ok := v.StringValueOK()
	if !ok {
		return "", nil
	}
	if mech != mechSHA1 && mech != mechSHA256 {
		return "", mongoerr.New(mongoerr.MechanismUnavailable, "Received authentication for mechanism %s which is unknown or not enabled", mech)
	}
	return mech, nil
}

// payload reads a SASL payload: binary, or a base64 string as old shells send.
func saslPayload(v bson.RawValue) ([]byte, bool) {
	if _, data, ok := v.BinaryOK(); ok {
		return data, len(data) <= maxSASLPayload
	}
	if s, ok := v.StringValueOK(); ok && len(s) <= maxSASLPayload*4/3+4 {
		b, err := base64.StdEncoding.DecodeString(s)
		return b, err == nil
	}
	return nil, false
}

// saslStart begins a conversation in db from {saslStart|mechanism, payload,
// options}. It returns the reply fields, or the failure to report.
func (s *Server) saslStart(c *conn, db string, cmd bson.Raw, speculative bool) (bson.D, error) {
	mech, err := parseMechanism(cmd.Lookup("mechanism"))
	if err != nil {
		s.authFailed(c, nil, reasonMechanism, speculative)
		return nil, err
	}
	if mech == "" {
		return nil, s.authFailed(c, nil, reasonMalformed, speculative)
	}
	payload, ok := saslPayload(cmd.Lookup("payload"))
	if !ok {
		return nil, s.authFailed(c, nil, reasonMalformed, speculative)
	}
	conv := &saslConv{mech: mech, db: db}
	if v, err := cmd.LookupErr("options", "skipEmptyExchange"); err == nil {
		conv.skipEmpty = truthy(v)
	}
	hashFn := scram.SHA256
	if mech == mechSHA1 {
		hashFn = scram.SHA1
	}
	srv, err := hashFn.NewServer(func(name string) (scram.StoredCredentials, error) {
		u := s.lookupUser(db, name)
		if u == nil {
			return scram.StoredCredentials{}, errUnknownUser
		}
		cred, ok := u.Creds[mech]
		if !ok {
			return scram.StoredCredentials{}, errUnknownUser
		}
		conv.user = u
		return cred, nil
	})
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	conv.scram = srv.NewConversation()
	out, err := conv.scram.Step(string(payload))
	if err != nil {
		reason := reasonMalformed
		if errors.Is(err, errUnknownUser) {
			reason = reasonUnknownUser
		}
		return nil, s.authFailed(c, conv.user, reason, speculative)
	}
	c.auth.nextConv++
	conv.id = c.auth.nextConv
	c.auth.conv = conv
	return bson.D{
		{Key: "conversationId", Value: conv.id},
		{Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}},
	}, nil
}

var errUnknownUser = errors.New("unknown user")

// saslContinue advances the conversation conversationId.
func (s *Server) saslContinue(c *conn, db string, cmd bson.Raw) (bson.D, error) {
	conv := c.auth.conv
	id, _ := cmd.Lookup("conversationId").AsInt64OK()
	if conv == nil || int64(conv.id) != id || conv.db != db {
		c.auth.conv = nil
		return nil, s.authFailed(c, nil, reasonMalformed, false)
	}
	payload, ok := saslPayload(cmd.Lookup("payload"))
	if !ok {
		c.auth.conv = nil
		return nil, s.authFailed(c, conv.user, reasonMalformed, false)
	}
	reply := func(done bool, out []byte) bson.D {
		return bson.D{
			{Key: "conversationId", Value: conv.id},
			{Key: "done", Value: done},
			{Key: "payload", Value: bson.Binary{Data: out}},
		}
	}
	if conv.proven { // the final, empty exchange
		c.auth.conv = nil
		if len(payload) != 0 {
			return nil, s.authFailed(c, conv.user, reasonMalformed, false)
		}
		s.authenticated(c, conv.user)
		return reply(true, []byte{}), nil
	}
	out, err := conv.scram.Step(string(payload))
	if err != nil || !conv.scram.Valid() {
		c.auth.conv = nil
		reason := reasonMalformed
		if strings.HasPrefix(out, "e=invalid-proof") {
			reason = reasonWrongPassword
		}
		return nil, s.authFailed(c, conv.user, reason, false)
	}
	if conv.skipEmpty {
		c.auth.conv = nil
		s.authenticated(c, conv.user)
		return reply(true, []byte(out)), nil
	}
	conv.proven = true
	return reply(false, []byte(out)), nil
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
	st.mu.Unlock()
	c.log.Debug("authenticated", "user", u.User, "db", u.DB)
}

// authFailed counts one failure, waits the growing pause it has earned,
// marks the connection for closing past the limit, and returns the error
// the client gets. A failed speculative attempt is not counted: the
// driver then authenticates normally, and that attempt counts.
func (s *Server) authFailed(c *conn, u *authUser, reason string, speculative bool) error {
	if speculative {
		return authFailedErr
	}
	st := &s.auth.stats
	st.mu.Lock()
	if st.byReason == nil {
		st.byReason, st.byUser, st.streak = map[string]int64{}, map[string]int64{}, map[string]int{}
	}
	st.byReason[reason]++
	streak := 0
	if u != nil && s.lookupUser(u.DB, u.User) != nil {
		st.byUser[u.ID]++
		st.streak[u.ID]++
		streak = st.streak[u.ID]
	}
	st.mu.Unlock()
	c.auth.failures++
	c.log.Info("authentication failed", "reason", reason, "failures", c.auth.failures)
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
	s.authFailed(c, nil, reasonMechanism, false)
	return nil, mongoerr.New(mongoerr.MechanismUnavailable, "Received authentication for mechanism %s which is unknown or not enabled", mech)
}

// cmdLogout forgets the connection's user.
func (s *Server) cmdLogout(_ context.Context, c *conn, _ *request) (bson.D, error) {
	c.auth.user, c.auth.privs, c.auth.conv = nil, nil, nil
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
