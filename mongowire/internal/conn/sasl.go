package conn

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// The SASL handshake: SCRAM-SHA-1 and SCRAM-SHA-256 conversations over
// saslStart and saslContinue (or hello's speculativeAuthenticate), the
// conversation ids, payloads and final empty exchange. The SCRAM state
// machine is xdg-go/scram's. Who the users are, what they may do, and how
// failures are counted, slowed and punished is the command layer's: it
// gives the credentials and gets back the user, or a Failure.

// The SCRAM mechanisms offered.
const (
	MechSHA1   = "SCRAM-SHA-1"
	MechSHA256 = "SCRAM-SHA-256"
)

// maxSASLPayload bounds one SCRAM message: real ones are a few hundred bytes.
const maxSASLPayload = 8 << 10

// Failure reasons.
const (
	ReasonUnknownUser   = "unknown_user"
	ReasonWrongPassword = "wrong_password"
	ReasonMechanism     = "mechanism_unavailable"
	ReasonMalformed     = "malformed"
)

// Failure is a failed step of a conversation. The command layer counts it
// and answers with Err if set, else AuthenticationFailed: the client
// learns only that it failed, not why.
type Failure[U any] struct {
	Reason string
	User   U      // the user the conversation named, if it named a known one
	Err    error  // the error for the client, when it is not AuthenticationFailed
	Detail string // why, for the server's log only, when Reason does not say enough
}

func (f *Failure[U]) Error() string { return "authentication failed: " + f.Reason }

// Credentials returns the stored SCRAM credentials of user in db for
// mechanism mech, and the user; ok is false for an unknown user or one
// without credentials for mech.
type Credentials[U any] func(db, user, mech string) (cred scram.StoredCredentials, u U, ok bool)

// SASL is one connection's SASL state: the conversation in progress. The
// zero value has none. Only the connection's goroutine uses it.
type SASL[U any] struct {
	conv *saslConv[U]
	next int32 // the last conversation id given
}

type saslConv[U any] struct {
	id        int32
	db        string
	scram     *scram.ServerConversation
	user      U
	named     bool // the first step named an existing user
	skipEmpty bool // the client asked to skip the final empty exchange
	proven    bool // the client's proof was valid; waiting for the empty exchange
}

var errUnknownUser = errors.New("unknown user")

// Reset forgets the conversation in progress (logout).
func (a *SASL[U]) Reset() { a.conv = nil }

// Start begins a conversation in db from {saslStart|mechanism, payload}
// (skipEmpty: options.skipEmptyExchange), replacing any in progress. It
// returns the reply fields, or a *Failure, or another error (our bug).
func (a *SASL[U]) Start(db string, cmd bson.Raw, skipEmpty bool, creds Credentials[U]) (bson.D, error) {
	mech, ok := cmd.Lookup("mechanism").StringValueOK()
	switch {
	case !ok:
		return nil, &Failure[U]{Reason: ReasonMalformed}
	case mech != MechSHA1 && mech != MechSHA256:
		// 334, as mongod, for x.509, LDAP, Kerberos and the rest.
		return nil, &Failure[U]{Reason: ReasonMechanism, Err: mongoerr.New(mongoerr.MechanismUnavailable,
			"Received authentication for mechanism %s which is unknown or not enabled", mech)}
	}
	payload, ok := saslPayload(cmd.Lookup("payload"))
	if !ok {
		return nil, &Failure[U]{Reason: ReasonMalformed}
	}
	if err := checkClientFirst(string(payload)); err != nil {
		return nil, &Failure[U]{Reason: ReasonMalformed, Detail: err.Error()}
	}
	conv := &saslConv[U]{db: db, skipEmpty: skipEmpty}
	hashFn := scram.SHA256
	if mech == MechSHA1 {
		hashFn = scram.SHA1
	}
	srv, err := hashFn.NewServer(func(name string) (scram.StoredCredentials, error) {
		cred, u, ok := creds(db, name, mech)
		if !ok {
			return scram.StoredCredentials{}, errUnknownUser
		}
		conv.user, conv.named = u, true
		return cred, nil
	})
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	conv.scram = srv.NewConversation()
	out, err := conv.scram.Step(string(payload))
	if err != nil {
		reason := ReasonMalformed
		if errors.Is(err, errUnknownUser) {
			reason = ReasonUnknownUser
		}
		return nil, conv.failure(reason)
	}
	a.next++
	conv.id = a.next
	a.conv = conv
	return bson.D{
		{Key: "conversationId", Value: conv.id},
		{Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}},
	}, nil
}

// Continue advances the conversation conversationId of
// {saslContinue|conversationId, payload} in db. It returns the reply
// fields and, once the conversation is done, done true and the
// authenticated user; or a *Failure, which ends the conversation.
func (a *SASL[U]) Continue(db string, cmd bson.Raw) (reply bson.D, done bool, user U, err error) {
	conv := a.conv
	id, _ := cmd.Lookup("conversationId").AsInt64OK()
	if conv == nil || int64(conv.id) != id || conv.db != db {
		a.conv = nil
		return nil, false, user, &Failure[U]{Reason: ReasonMalformed}
	}
	payload, ok := saslPayload(cmd.Lookup("payload"))
	if !ok {
		a.conv = nil
		return nil, false, user, conv.failure(ReasonMalformed)
	}
	answer := func(done bool, out []byte) bson.D {
		return bson.D{
			{Key: "conversationId", Value: conv.id},
			{Key: "done", Value: done},
			{Key: "payload", Value: bson.Binary{Data: out}},
		}
	}
	if conv.proven { // the final, empty exchange
		a.conv = nil
		if len(payload) != 0 {
			return nil, false, user, conv.failure(ReasonMalformed)
		}
		return answer(true, []byte{}), true, conv.user, nil
	}
	out, err := conv.scram.Step(string(payload))
	if err != nil || !conv.scram.Valid() {
		a.conv = nil
		reason := ReasonMalformed
		if strings.HasPrefix(out, "e=invalid-proof") {
			reason = ReasonWrongPassword
		}
		return nil, false, user, conv.failure(reason)
	}
	if conv.skipEmpty {
		a.conv = nil
		return answer(true, []byte(out)), true, conv.user, nil
	}
	conv.proven = true
	return answer(false, []byte(out)), false, user, nil
}

// minClientNonce is the shortest client nonce mongod accepts: its
// client-first message's "r=" field must have at least 6 characters.
const minClientNonce = 4

// checkClientFirst refuses, as mongod's SCRAM server conversation does,
// two things in a client-first message (RFC 5802: gs2 header "n,[a=authzid],",
// then "n=user,r=nonce") that xdg-go/scram lets through: a client nonce
// shorter than minClientNonce (empty, the server's nonce would be all
// there is), and an authorization identity other than the user, which
// the server would otherwise ignore, authenticating the user as itself.
// A message too broken to hold these fields is left to scram to refuse.
func checkClientFirst(msg string) error {
	f := strings.SplitN(msg, ",", 5)
	if len(f) < 4 {
		return nil
	}
	user, _ := strings.CutPrefix(f[2], "n=")
	if authz, ok := strings.CutPrefix(f[1], "a="); ok && decodeSASLName(authz) != decodeSASLName(user) {
		return fmt.Errorf("SCRAM user name %s does not match authzid %s", user, authz)
	}
	if nonce, ok := strings.CutPrefix(f[3], "r="); ok && len(nonce) < minClientNonce {
		return fmt.Errorf("invalid SCRAM client nonce: %q", f[3])
	}
	return nil
}

// decodeSASLName undoes RFC 5802's escapes of ',' and '=' in names.
func decodeSASLName(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}

// failure is a Failure naming the conversation's user, if it has one.
func (c *saslConv[U]) failure(reason string) *Failure[U] {
	f := &Failure[U]{Reason: reason}
	if c.named {
		f.User = c.user
	}
	return f
}

// saslPayload reads a SASL payload: binary, or a base64 string as old
// shells send, bounded in size.
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
