package mongowire

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

const testAdminPassword = "internal-admin-pw"

func startAuthServer(t testing.TB, opts ...func(*Config)) *Server {
	t.Helper()
	return startServer(t, append([]func(*Config){func(c *Config) {
		c.Auth = true
		c.AdminUser = "admin"
		c.AdminPassword = testAdminPassword
		c.AuthFailureDelay = -1
	}}, opts...)...)
}

// scramLogin runs a whole SCRAM conversation on nc as a driver does (no
// skipEmptyExchange) and returns the last reply.
func scramLogin(t testing.TB, nc net.Conn, mech, db, user, pwd string) bson.Raw {
	t.Helper()
	hash, password := scram.SHA256, pwd
	if mech == mechSHA1 {
		hash, password = scram.SHA1, digestSHA1(user, pwd)
	}
	client, err := hash.NewClientUnprepped(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	out, _ := conv.Step("")
	reply := roundTrip(t, nc, bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mech}, {Key: "payload", Value: bson.Binary{Data: []byte(out)}}, {Key: "$db", Value: db}})
	for reply.Lookup("ok").AsFloat64() == 1 && !reply.Lookup("done").Boolean() {
		_, in := reply.Lookup("payload").Binary()
		out, err := conv.Step(string(in))
		if err != nil {
			t.Fatalf("client step: %v (server said %q)", err, in)
		}
		reply = roundTrip(t, nc, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: reply.Lookup("conversationId").Int32()}, {Key: "payload", Value: bson.Binary{Data: []byte(out)}}, {Key: "$db", Value: db}})
	}
	return reply
}

// TestEveryCommandNeedsAuthentication sends every command of the table
// before authentication: all but the handshake get 13.
func TestEveryCommandNeedsAuthentication(t *testing.T) {
	s := startAuthServer(t, func(c *Config) { c.EnableTestCommands = true })
	nc := dial(t, s)
	n := 0
	for name, cmd := range s.commands {
		if noAuthCommands[name] {
			continue
		}
		db := "test"
		if cmd.adminOnly {
			db = "admin"
		}
		reply := roundTrip(t, nc, bson.D{{Key: name, Value: "c"}, {Key: "$db", Value: db}})
		wantError(t, reply, mongoerr.Unauthorized, "Command "+name+" requires authentication")
		n++
	}
	if n < 40 {
		t.Fatalf("only %d commands checked", n)
	}
	for name := range noAuthCommands {
		if _, ok := s.commands[name]; !ok {
			t.Errorf("handshake command %s is not in the command table", name)
		}
	}
	if reply := roundTrip(t, nc, ping); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("ping before authentication: %v", reply)
	}
	for _, name := range []string{"ismaster", "isMaster", "hello"} { // the legacy handshake, as Node and mongosh send it
		if _, err := nc.Write(opQuery(t, "admin.$cmd", bson.D{{Key: name, Value: 1}})); err != nil {
			t.Fatal(err)
		}
		if _, reply := readReply(t, nc); reply.Lookup("ok").AsFloat64() != 1 {
			t.Fatalf("OP_QUERY %s before authentication: %v", name, reply)
		}
	}
	reply := scramLogin(t, nc, mechSHA256, "admin", "admin", testAdminPassword)
	if !reply.Lookup("done").Boolean() || reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("login: %v", reply)
	}
	if reply := roundTrip(t, nc, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "test"}}); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("find after login: %v", reply)
	}
}

// TestSASLMalformed: broken conversations fail with 18 (or 334 for a
// mechanism this server lacks), and the connection stays usable.
func TestSASLMalformed(t *testing.T) {
	s := startAuthServer(t, func(c *Config) { c.AuthFailureLimit = 1000 })
	nc := dial(t, s)
	start := func(mech any, payload any) bson.D {
		d := bson.D{{Key: "saslStart", Value: 1}}
		if mech != nil {
			d = append(d, bson.E{Key: "mechanism", Value: mech})
		}
		if payload != nil {
			d = append(d, bson.E{Key: "payload", Value: payload})
		}
		return append(d, bson.E{Key: "$db", Value: "admin"})
	}
	bin := func(s string) bson.Binary { return bson.Binary{Data: []byte(s)} }
	for name, tc := range map[string]struct {
		cmd  bson.D
		code int32
	}{
		"no mechanism":           {start(nil, bin("n,,n=admin,r=abc")), mongoerr.AuthenticationFailed},
		"mechanism not string":   {start(int32(1), bin("n,,n=admin,r=abc")), mongoerr.AuthenticationFailed},
		"PLAIN":                  {start("PLAIN", bin("\x00admin\x00pw")), mongoerr.MechanismUnavailable},
		"MONGODB-X509":           {start("MONGODB-X509", bin("")), mongoerr.MechanismUnavailable},
		"GSSAPI":                 {start("GSSAPI", bin("")), mongoerr.MechanismUnavailable},
		"lower case":             {start("scram-sha-256", bin("n,,n=admin,r=abc")), mongoerr.MechanismUnavailable},
		"no payload":             {start(mechSHA256, nil), mongoerr.AuthenticationFailed},
		"payload wrong type":     {start(mechSHA256, int32(7)), mongoerr.AuthenticationFailed},
		"empty payload":          {start(mechSHA256, bin("")), mongoerr.AuthenticationFailed},
		"garbage":                {start(mechSHA256, bin("\xff\xfe garbage")), mongoerr.AuthenticationFailed},
		"truncated":              {start(mechSHA256, bin("n,,n=adm")), mongoerr.AuthenticationFailed},
		"no nonce":               {start(mechSHA1, bin("n,,n=admin")), mongoerr.AuthenticationFailed},
		"channel binding":        {start(mechSHA256, bin("p=tls-unique,,n=admin,r=abc")), mongoerr.AuthenticationFailed},
		"empty nonce":            {start(mechSHA256, bin("n,,n=admin,r=")), mongoerr.AuthenticationFailed},
		"empty nonce, SHA-1":     {start(mechSHA1, bin("n,,n=admin,r=")), mongoerr.AuthenticationFailed},
		"authzid of another":     {start(mechSHA256, bin("n,a=root,n=admin,r=clientnonce")), mongoerr.AuthenticationFailed},
		"huge":                   {start(mechSHA256, bin("n,,n=admin,r="+strings.Repeat("x", 1<<20))), mongoerr.AuthenticationFailed},
		"huge string":            {start(mechSHA256, strings.Repeat("A", 1<<20)), mongoerr.AuthenticationFailed},
		"continue without start": {bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: int32(1)}, {Key: "payload", Value: bin("c=biws,r=x,p=eA==")}, {Key: "$db", Value: "admin"}}, mongoerr.AuthenticationFailed},
		"authenticate x509":      {bson.D{{Key: "authenticate", Value: 1}, {Key: "mechanism", Value: "MONGODB-X509"}, {Key: "$db", Value: "$external"}}, mongoerr.MechanismUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, roundTrip(t, nc, tc.cmd), tc.code, "")
		})
	}
	// A started conversation fed a broken final message.
	for name, final := range map[string]string{
		"empty": "", "truncated": "c=biws,r=", "bad proof": "c=biws,r=%s,p=AAAA", "wrong nonce": "c=biws,r=nope,p=AAAA",
		"not base64": "c=biws,r=%s,p=!!!!", "huge": "c=biws,r=%s,p=" + strings.Repeat("A", 1<<16),
	} {
		t.Run("final "+name, func(t *testing.T) {
			reply := roundTrip(t, nc, start(mechSHA256, bin("n,,n=admin,r=clientnonce")))
			if reply.Lookup("ok").AsFloat64() != 1 {
				t.Fatalf("saslStart: %v", reply)
			}
			_, first := reply.Lookup("payload").Binary()
			nonce := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
			if strings.Contains(final, "%s") {
				final = strings.Replace(final, "%s", nonce, 1)
			}
			reply = roundTrip(t, nc, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: reply.Lookup("conversationId").Int32()}, {Key: "payload", Value: bin(final)}, {Key: "$db", Value: "admin"}})
			wantError(t, reply, mongoerr.AuthenticationFailed, "Authentication failed.")
		})
	}
	if reply := roundTrip(t, nc, ping); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("connection unusable after failures: %v", reply)
	}
	if reply := scramLogin(t, nc, mechSHA1, "admin", "admin", testAdminPassword); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("login after failures: %v", reply)
	}
}

// TestAuthFailureDelayAndClose: the third failure and later wait, each
// twice as long, and the connection closes at the limit.
func TestAuthFailureDelayAndClose(t *testing.T) {
	const base = 30 * time.Millisecond
	s := startAuthServer(t, func(c *Config) {
		c.AuthFailureDelay, c.AuthFailureMaxDelay, c.AuthFailureLimit = base, 2*base, 5
	})
	nc := dial(t, s)
	for i := 1; i <= 5; i++ {
		begin := time.Now()
		reply := scramLogin(t, nc, mechSHA256, "admin", "admin", "wrong")
		took := time.Since(begin)
		wantError(t, reply, mongoerr.AuthenticationFailed, "Authentication failed.")
		want := map[int]time.Duration{3: base, 4: 2 * base, 5: 2 * base}[i]
		if took < want {
			t.Fatalf("failure %d answered after %v, want at least %v", i, took, want)
		}
	}
	expectClosed(t, nc)
	st := s.AuthStats()
	if st.ClosedConnections != 1 || st.Failures[reasonWrongPassword] != 5 || st.UserFailures["admin.admin"] != 5 {
		t.Fatalf("AuthStats = %+v", st)
	}
	// The user's streak outlives the connection: a fresh one still waits.
	nc2 := dial(t, s)
	begin := time.Now()
	wantError(t, scramLogin(t, nc2, mechSHA256, "admin", "admin", "wrong"), mongoerr.AuthenticationFailed, "")
	if took := time.Since(begin); took < 2*base {
		t.Fatalf("a new connection's failure for a user with 5 failures answered after %v, want %v", took, 2*base)
	}
	// A success ends the streak.
	if reply := scramLogin(t, nc2, mechSHA256, "admin", "admin", testAdminPassword); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("login: %v", reply)
	}
	if d := s.failureDelay(2); d != 0 {
		t.Fatalf("delay of the second failure = %v, want 0", d)
	}
}

// TestAuthFailureDelayPerAddress: a client that opens a new connection
// for every guess, on names that do not exist, still waits from its third
// failure on: the streak is its address's. Another address does not wait,
// and a success from the address ends its streak.
func TestAuthFailureDelayPerAddress(t *testing.T) {
	const base = 200 * time.Millisecond
	s := startAuthServer(t, func(c *Config) { c.AuthFailureDelay, c.AuthFailureMaxDelay = base, base })
	guess := func(nc net.Conn) time.Duration {
		t.Helper()
		begin := time.Now()
		wantError(t, scramLogin(t, nc, mechSHA256, "admin", "nobody", "guess"), mongoerr.AuthenticationFailed, "Authentication failed.")
		return time.Since(begin)
	}
	for i := 1; i <= 3; i++ {
		took := guess(dial(t, s))
		if i < 3 && took >= base {
			t.Errorf("failure %d answered after %v, want no wait", i, took)
		}
		if i == 3 && took < base {
			t.Fatalf("the third failure from the address, on its own connection, answered after %v, want at least %v", took, base)
		}
	}

	// All of 127.0.0.0/8 is loopback on Linux; elsewhere only 127.0.0.1 may be.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if other, err := d.Dial("tcp", s.Addr()); err != nil {
		t.Logf("not checking another address: %v", err)
	} else {
		t.Cleanup(func() { other.Close() })
		other.SetDeadline(time.Now().Add(10 * time.Second))
		if took := guess(other); took >= base {
			t.Errorf("a failure from another address answered after %v, want no wait", took)
		}
	}

	nc := dial(t, s)
	if reply := scramLogin(t, nc, mechSHA256, "admin", "admin", testAdminPassword); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("login: %v", reply)
	}
	if took := guess(dial(t, s)); took >= base {
		t.Errorf("after a success from the address, a failure answered after %v, want no wait", took)
	}
}

func TestSpeculativeAuthenticate(t *testing.T) {
	s := startAuthServer(t)
	nc := dial(t, s)
	client, _ := scram.SHA256.NewClient("admin", testAdminPassword, "")
	conv := client.NewConversation()
	out, _ := conv.Step("")
	reply := roundTrip(t, nc, bson.D{
		{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.admin"},
		{Key: "speculativeAuthenticate", Value: bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mechSHA256}, {Key: "payload", Value: bson.Binary{Data: []byte(out)}}, {Key: "db", Value: "admin"}, {Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}}}},
		{Key: "$db", Value: "admin"},
	})
	if mechs := reply.Lookup("saslSupportedMechs").String(); mechs != `["SCRAM-SHA-1","SCRAM-SHA-256"]` {
		t.Fatalf("saslSupportedMechs = %s", mechs)
	}
	spec, ok := reply.Lookup("speculativeAuthenticate").DocumentOK()
	if !ok {
		t.Fatalf("hello: no speculativeAuthenticate in %v", reply)
	}
	_, first := spec.Lookup("payload").Binary()
	final, err := conv.Step(string(first))
	if err != nil {
		t.Fatal(err)
	}
	reply = roundTrip(t, nc, bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: spec.Lookup("conversationId").Int32()}, {Key: "payload", Value: bson.Binary{Data: []byte(final)}}, {Key: "$db", Value: "admin"}})
	if !reply.Lookup("done").Boolean() {
		t.Fatalf("saslContinue with skipEmptyExchange: %v", reply)
	}
	_, v := reply.Lookup("payload").Binary()
	if _, err := conv.Step(string(v)); err != nil || !conv.Valid() {
		t.Fatalf("server signature not valid: %v", err)
	}
	if reply := roundTrip(t, nc, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "$db", Value: "t"}}); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("insert after speculative authentication: %v", reply)
	}
	// An unknown user only leaves the field out.
	reply = roundTrip(t, nc, bson.D{
		{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.nobody"},
		{Key: "speculativeAuthenticate", Value: bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mechSHA256}, {Key: "payload", Value: bson.Binary{Data: []byte("n,,n=nobody,r=x")}}, {Key: "db", Value: "admin"}}},
		{Key: "$db", Value: "admin"},
	})
	if _, err := reply.LookupErr("speculativeAuthenticate"); err == nil || reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("hello for an unknown user: %v", reply)
	}
	if _, err := reply.LookupErr("saslSupportedMechs"); err == nil {
		t.Fatalf("saslSupportedMechs for an unknown user: %v", reply)
	}
}

// FuzzSASL drives saslStart and saslContinue with arbitrary payloads: every
// one gets an answer, never a panic or an InternalError.
func FuzzSASL(f *testing.F) {
	f.Add(uint8(1), []byte("n,,n=admin,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(uint8(0), []byte("n,,n=admin,r=abcdef"), []byte(""))
	f.Add(uint8(1), []byte("y,,n=admin,r=x"), []byte("c=eSws,r=x,p=dGVzdA=="))
	f.Add(uint8(1), []byte("n,a=admin,n=admin,r=x"), []byte("c=biwsYT1hZG1pbiw=,r=x,p="))
	f.Add(uint8(2), []byte("n,,n==2Cad=3Dmin,r=x,e=ext"), []byte("c=biws,r=x,m=ext,p=AA=="))
	f.Add(uint8(1), []byte(""), []byte("\x00\xff"))
	s := startAuthServer(f, func(c *Config) { c.AuthFailureLimit = 1 << 30 })
	c := &conn{s: s, log: s.log}
	mechs := []any{mechSHA1, mechSHA256, "PLAIN", int32(1)}
	f.Fuzz(func(t *testing.T, mech uint8, first, final []byte) {
		ctx := context.Background()
		send := func(d bson.D) bson.Raw {
			b, err := bson.Marshal(append(d, bson.E{Key: "$db", Value: "admin"}))
			if err != nil {
				t.Fatal(err)
			}
			reply, err := s.dispatch(ctx, c, b)
			if err != nil {
				t.Fatalf("dispatch: %v", err)
			}
			r := bson.Raw(reply)
			if code, _ := r.Lookup("code").Int32OK(); code == mongoerr.InternalError {
				t.Fatalf("internal error: %v", r)
			}
			return r
		}
		r := send(bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mechs[int(mech)%len(mechs)]}, {Key: "payload", Value: bson.Binary{Data: first}}, {Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: mech%2 == 0}}}})
		if r.Lookup("ok").AsFloat64() != 1 {
			return
		}
		r = send(bson.D{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: r.Lookup("conversationId").Int32()}, {Key: "payload", Value: bson.Binary{Data: final}}})
		if r.Lookup("ok").AsFloat64() == 1 && r.Lookup("done").Boolean() {
			t.Fatalf("fuzzed conversation authenticated: %q %q", first, final)
		}
		c.auth = connAuth{}
	})
}

// BenchmarkAuthorize is the per-command cost of the privilege check for a
// readWrite user: no allocation, no recomputation.
//
//	go test ./mongowire -run '^$' -bench BenchmarkAuthorize -benchmem
func BenchmarkAuthorize(b *testing.B) {
	s := startAuthServer(b)
	u, err := newUser("app", "svc", "pw", []string{mechSHA256}, []roleRef{{Role: "readWrite", DB: "app"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.putUser(u, true); err != nil {
		b.Fatal(err)
	}
	c := &conn{s: s, log: s.log}
	s.authenticated(c, u)
	for name, cmd := range map[string]bson.D{
		"find":   {{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}},
		"insert": {{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}},
		"update": {{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}}}}},
	} {
		r := &request{name: name, db: "app", cmd: marshal(b, cmd)}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.authorize(c, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRolePrivileges checks the command-to-privilege map against each
// built-in role: what it allows, and what it must refuse.
func TestRolePrivileges(t *testing.T) {
	s := startAuthServer(t)
	cmd := func(db string, d bson.D) *request {
		return &request{name: d[0].Key, db: db, cmd: marshal(t, d)}
	}
	find := cmd("a", bson.D{{Key: "find", Value: "c"}})
	insert := cmd("a", bson.D{{Key: "insert", Value: "c"}})
	upsert := cmd("a", bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{}}, {Key: "upsert", Value: true}}}}})
	findOther := cmd("b", bson.D{{Key: "find", Value: "c"}})
	findUsers := cmd("admin", bson.D{{Key: "find", Value: "system.users"}})
	collMod := cmd("a", bson.D{{Key: "collMod", Value: "c"}})
	dropDB := cmd("a", bson.D{{Key: "dropDatabase", Value: 1}})
	createUser := cmd("a", bson.D{{Key: "createUser", Value: "x"}, {Key: "roles", Value: bson.A{"read"}}})
	grantRoot := cmd("admin", bson.D{{Key: "grantRolesToUser", Value: "x"}, {Key: "roles", Value: bson.A{"root"}}})
	serverStatus := cmd("admin", bson.D{{Key: "serverStatus", Value: 1}})
	dbStream := cmd("a", bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}}})
	clusterStream := cmd("admin", bson.D{{Key: "aggregate", Value: 1}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{{Key: "allChangesForCluster", Value: true}}}}}}})
	lookupOther := cmd("a", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$facet", Value: bson.D{{Key: "f", Value: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "x"}, {Key: "as", Value: "j"}}}}}}}}}}}})
	mergeInto := cmd("a", bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$merge", Value: bson.D{{Key: "into", Value: bson.D{{Key: "db", Value: "b"}, {Key: "coll", Value: "m"}}}}}}}}})
	explainInsert := cmd("a", bson.D{{Key: "explain", Value: bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{}}}}})
	renameSame := cmd("admin", bson.D{{Key: "renameCollection", Value: "a.c"}, {Key: "to", Value: "a.d"}})
	renameAcross := cmd("admin", bson.D{{Key: "renameCollection", Value: "a.c"}, {Key: "to", Value: "b.d"}})
	replStatus := cmd("admin", bson.D{{Key: "replSetGetStatus", Value: 1}})
	killAll := cmd("admin", bson.D{{Key: "killAllSessions", Value: bson.A{}}})
	killByPattern := cmd("admin", bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{}}})

	for _, tc := range []struct {
		roles        []roleRef
		allow, refus []*request
	}{
		{[]roleRef{{"read", "a"}}, []*request{find, dbStream}, []*request{insert, upsert, findOther, findUsers, collMod, dropDB, createUser, serverStatus, clusterStream, explainInsert, renameSame, mergeInto}},
		{[]roleRef{{"readWrite", "a"}}, []*request{find, insert, upsert, lookupOther, explainInsert, renameSame}, []*request{findOther, collMod, dropDB, renameAcross, mergeInto, clusterStream}},
		{[]roleRef{{"readWrite", "a"}, {"readWrite", "b"}}, []*request{mergeInto, renameAcross}, []*request{findUsers, serverStatus}},
		{[]roleRef{{"dbAdmin", "a"}}, []*request{collMod, dropDB, renameSame}, []*request{find, insert}},
		{[]roleRef{{"userAdmin", "a"}}, []*request{createUser}, []*request{find, grantRoot}},
		{[]roleRef{{"readAnyDatabase", "admin"}}, []*request{find, findOther, dbStream, clusterStream}, []*request{insert, findUsers, serverStatus}},
		{[]roleRef{{"readWriteAnyDatabase", "admin"}}, []*request{insert, mergeInto, renameAcross}, []*request{collMod, findUsers}},
		{[]roleRef{{"userAdminAnyDatabase", "admin"}}, []*request{createUser, grantRoot}, []*request{find}},
		{[]roleRef{{"dbAdminAnyDatabase", "admin"}}, []*request{collMod, dropDB}, []*request{find}},
		{[]roleRef{{"clusterMonitor", "admin"}}, []*request{serverStatus, replStatus}, []*request{find, dropDB, killAll, killByPattern}},
		{[]roleRef{{"clusterManager", "admin"}}, []*request{replStatus}, []*request{find, serverStatus, killAll}},
		{[]roleRef{{"hostManager", "admin"}}, []*request{killAll, killByPattern}, []*request{find, serverStatus, replStatus}},
		{[]roleRef{{"clusterAdmin", "admin"}}, []*request{serverStatus, replStatus, killAll, killByPattern, dropDB}, []*request{find}},
		{[]roleRef{{"root", "admin"}}, []*request{find, insert, findUsers, grantRoot, clusterStream, serverStatus, mergeInto}, nil},
	} {
		p := compilePrivileges(tc.roles)
		for _, r := range tc.allow {
			if !s.permits(p, r) {
				t.Errorf("%v may not run %s on %s %s", tc.roles, r.name, r.db, r.cmd)
			}
		}
		for _, r := range tc.refus {
			if s.permits(p, r) && !p.all {
				t.Errorf("%v may run %s on %s %s", tc.roles, r.name, r.db, r.cmd)
			}
		}
	}
	// Listing every user's sessions and killing them, in the roles mongod
	// gives them: listSessions to the monitoring roles, killAnySession to
	// hostManager, both to clusterAdmin and root.
	for _, tc := range []struct {
		role       roleRef
		list, kill bool
	}{
		{roleRef{"read", "a"}, false, false},
		{roleRef{"readWrite", "a"}, false, false},
		{roleRef{"dbAdmin", "a"}, false, false},
		{roleRef{"readWriteAnyDatabase", "admin"}, false, false},
		{roleRef{"dbAdminAnyDatabase", "admin"}, false, false},
		{roleRef{"clusterMonitor", "admin"}, true, false},
		{roleRef{"clusterManager", "admin"}, true, false},
		{roleRef{"hostManager", "admin"}, false, true},
		{roleRef{"clusterAdmin", "admin"}, true, true},
		{roleRef{"root", "admin"}, true, true},
	} {
		p := compilePrivileges([]roleRef{tc.role})
		if got := p.onCluster(actListSessions); got != tc.list {
			t.Errorf("%v has listSessions: %v, want %v", tc.role, got, tc.list)
		}
		if got := p.onCluster(actKillAnySession); got != tc.kill {
			t.Errorf("%v has killAnySession: %v, want %v", tc.role, got, tc.kill)
		}
	}
	// Every command in the table is either open, cluster-, database- or
	// collection-scoped, or checked by name: none falls through to "refused
	// to all but root" by omission.
	for name := range s.commands {
		_, cl := clusterCommands[name]
		_, db := dbCommands[name]
		_, co := collCommands[name]
		named := map[string]bool{"getMore": true, "killCursors": true, "update": true, "findAndModify": true, "aggregate": true,
			"explain": true, "renameCollection": true, "createUser": true, "updateUser": true, "dropUser": true,
			"dropAllUsersFromDatabase": true, "grantRolesToUser": true, "revokeRolesFromUser": true,
			"_mergeAuthzCollections": true, "splitVector": true, "dataSize": true}[name]
		if !noAuthCommands[name] && !anyUserCommands[name] && !cl && !db && !co && !named {
			t.Errorf("command %s has no privilege rule", name)
		}
	}
}
