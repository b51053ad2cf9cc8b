package conn

import (
	"errors"
	"testing"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// users is the command layer's side of a conversation: one user, "ann"
// in db "app", with SCRAM-SHA-256 keys of "secret".
func users(t *testing.T) Credentials[string] {
	t.Helper()
	c, err := scram.SHA256.NewClient("ann", "secret", "")
	if err != nil {
		t.Fatal(err)
	}
	cred := c.GetStoredCredentials(scram.KeyFactors{Salt: "0123456789abcdef0123456789ab", Iters: 4096})
	return func(db, user, mech string) (scram.StoredCredentials, string, bool) {
		if db != "app" || user != "ann" || mech != MechSHA256 {
			return scram.StoredCredentials{}, "", false
		}
		return cred, "app.ann", true
	}
}

func doc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// converse runs a whole conversation as a driver would, and returns the
// user it authenticated, or the failure.
func converse(t *testing.T, a *SASL[string], creds Credentials[string], mech, user, pwd string, skipEmpty bool) (string, error) {
	t.Helper()
	client, err := scram.SHA256.NewClient(user, pwd, "")
	if err != nil {
		t.Fatal(err)
	}
	cc := client.NewConversation()
	first, err := cc.Step("")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := a.Start("app", doc(t, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mech}, {Key: "payload", Value: bson.Binary{Data: []byte(first)}}}), skipEmpty, creds)
	if err != nil {
		return "", err
	}
	for {
		r := doc(t, reply)
		id := r.Lookup("conversationId").Int32()
		_, payload := r.Lookup("payload").Binary()
		out := ""
		if !cc.Done() {
			if out, err = cc.Step(string(payload)); err != nil {
				t.Fatalf("client step: %v", err)
			}
		}
		var done bool
		var u string
		reply, done, u, err = a.Continue("app", doc(t, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id}, {Key: "payload", Value: bson.Binary{Data: []byte(out)}}}))
		if err != nil || done {
			return u, err
		}
	}
}

func TestSASL(t *testing.T) {
	creds := users(t)
	tests := map[string]struct {
		mech, user, pwd string
		skipEmpty       bool
		wantUser        string
		wantReason      string
		wantFailedUser  string
	}{
		"authenticates":         {mech: MechSHA256, user: "ann", pwd: "secret", wantUser: "app.ann"},
		"skips the empty step":  {mech: MechSHA256, user: "ann", pwd: "secret", skipEmpty: true, wantUser: "app.ann"},
		"wrong password":        {mech: MechSHA256, user: "ann", pwd: "guess", wantReason: ReasonWrongPassword, wantFailedUser: "app.ann"},
		"unknown user":          {mech: MechSHA256, user: "bob", pwd: "secret", wantReason: ReasonUnknownUser},
		"mechanism not offered": {mech: "PLAIN", user: "ann", pwd: "secret", wantReason: ReasonMechanism},
		"no keys for mechanism": {mech: MechSHA1, user: "ann", pwd: "secret", wantReason: ReasonUnknownUser},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var a SASL[string]
			u, err := converse(t, &a, creds, tt.mech, tt.user, tt.pwd, tt.skipEmpty)
			if tt.wantReason == "" {
				if err != nil || u != tt.wantUser {
					t.Fatalf("got user %q, err %v; want %q", u, err, tt.wantUser)
				}
				return
			}
			var f *Failure[string]
			if !errors.As(err, &f) {
				t.Fatalf("err = %v, want a *Failure", err)
			}
			if f.Reason != tt.wantReason || f.User != tt.wantFailedUser {
				t.Errorf("failure %q naming %q, want %q naming %q", f.Reason, f.User, tt.wantReason, tt.wantFailedUser)
			}
			if (tt.wantReason == ReasonMechanism) != (f.Err != nil) {
				t.Errorf("failure error %v: only an unavailable mechanism has its own", f.Err)
			}
		})
	}
}

// A saslContinue naming another conversation, or none, fails and leaves
// no conversation behind.
func TestSASLWrongConversation(t *testing.T) {
	var a SASL[string]
	cont := doc(t, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: int32(7)}, {Key: "payload", Value: bson.Binary{}}})
	if _, _, _, err := a.Continue("app", cont); err == nil {
		t.Fatal("continue without a conversation succeeded")
	}
	client, _ := scram.SHA256.NewClient("ann", "secret", "")
	first, _ := client.NewConversation().Step("")
	if _, err := a.Start("app", doc(t, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: MechSHA256}, {Key: "payload", Value: bson.Binary{Data: []byte(first)}}}), false, users(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.Continue("app", cont); err == nil {
		t.Fatal("continue of conversation 7 succeeded; the conversation is 1")
	}
	if a.conv != nil {
		t.Error("a failed continue left its conversation")
	}
}

// TestSASLClientFirst: as mongod, a client nonce shorter than 4 characters
// and an authorization identity other than the user are refused before any
// user is looked up; an authzid equal to the user is accepted.
func TestSASLClientFirst(t *testing.T) {
	creds := users(t)
	tests := map[string]struct {
		payload    string
		wantReason string // "" if the first step succeeds
	}{
		"empty nonce":            {"n,,n=ann,r=", ReasonMalformed},
		"three-character nonce":  {"n,,n=ann,r=abc", ReasonMalformed},
		"four-character nonce":   {"n,,n=ann,r=abcd", ""},
		"authzid of another":     {"n,a=root,n=ann,r=fyko+d2lbbFgONRv9qkxdawL", ReasonMalformed},
		"empty authzid":          {"n,a=,n=ann,r=fyko+d2lbbFgONRv9qkxdawL", ReasonMalformed},
		"authzid of the user":    {"n,a=ann,n=ann,r=fyko+d2lbbFgONRv9qkxdawL", ""},
		"authzid, another after": {"n,a=ann,n=ann2,r=fyko+d2lbbFgONRv9qkxdawL", ReasonMalformed},
		// Compared unescaped: the same user, "a,nn", who does not exist.
		"escaped authzid": {"n,a=a=2Cnn,n=a=2Cnn,r=fyko+d2lbbFgONRv9qkxdawL", ReasonUnknownUser},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var a SASL[string]
			_, err := a.Start("app", doc(t, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: MechSHA256}, {Key: "payload", Value: bson.Binary{Data: []byte(tt.payload)}}}), false, creds)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var f *Failure[string]
			if !errors.As(err, &f) || f.Reason != tt.wantReason || f.User != "" || f.Err != nil {
				t.Fatalf("err = %#v, want a %s Failure naming no user, answered AuthenticationFailed", err, tt.wantReason)
			}
		})
	}

	// A whole conversation whose client sends an authzid equal to the user.
	client, err := scram.SHA256.NewClient("ann", "secret", "ann")
	if err != nil {
		t.Fatal(err)
	}
	cc := client.NewConversation()
	first, _ := cc.Step("")
	var a SASL[string]
	reply, err := a.Start("app", doc(t, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: MechSHA256}, {Key: "payload", Value: bson.Binary{Data: []byte(first)}}}), true, creds)
	if err != nil {
		t.Fatal(err)
	}
	_, server := doc(t, reply).Lookup("payload").Binary()
	final, err := cc.Step(string(server))
	if err != nil {
		t.Fatal(err)
	}
	_, done, u, err := a.Continue("app", doc(t, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: int32(1)}, {Key: "payload", Value: bson.Binary{Data: []byte(final)}}}))
	if err != nil || !done || u != "app.ann" {
		t.Fatalf("authzid = user: done %v, user %q, err %v", done, u, err)
	}
}
