package mongowire_test

import (
	"bytes"
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

const adminPassword = "Tide-admin-pw-5b1f" // grepped for in the data directory

// startAuth starts a server requiring authentication, with the first user
// admin/adminPassword (root) created from the Config.
func startAuth(t *testing.T, opts ...func(*mongowire.Config)) *mongowire.Server {
	t.Helper()
	return testenv.MongoWire(t, append([]func(*mongowire.Config){func(c *mongowire.Config) {
		c.Auth = true
		c.AdminUser = "admin"
		c.AdminPassword = adminPassword
		c.AuthFailureDelay = -1 // abuse delays have their own test
	}}, opts...)...)
}

// userURI is s's URI with credentials and, if mech is set, authMechanism.
func userURI(s *mongowire.Server, user, pwd, source, mech string) string {
	u := "mongodb://" + url.UserPassword(user, pwd).String() + "@" + s.Addr() + "/?replicaSet=rs0&authSource=" + source
	if mech != "" {
		u += "&authMechanism=" + mech
	}
	return u
}

// connectAs connects and proves the connection works with a ping.
func connectAs(t *testing.T, s *mongowire.Server, user, pwd, source, mech string) (*mongo.Client, error) {
	t.Helper()
	c := testenv.MongoClient(t, userURI(s, user, pwd, source, mech))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return c, c.Ping(ctx, nil)
}

func mustConnectAs(t *testing.T, s *mongowire.Server, user, pwd, source, mech string) *mongo.Client {
	t.Helper()
	c, err := connectAs(t, s, user, pwd, source, mech)
	if err != nil {
		t.Fatalf("connect as %s@%s (%s): %v", user, source, mech, err)
	}
	return c
}

func createUser(t *testing.T, c *mongo.Client, db, user, pwd string, roles ...any) {
	t.Helper()
	cmd := bson.D{{Key: "createUser", Value: user}, {Key: "pwd", Value: pwd}, {Key: "roles", Value: append(bson.A{}, roles...)}}
	if err := c.Database(db).RunCommand(t.Context(), cmd).Err(); err != nil {
		t.Fatalf("createUser %s@%s: %v", user, db, err)
	}
}

func TestAuthSCRAM(t *testing.T) {
	s := startAuth(t)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-1", ""} {
		t.Run("mech="+mech, func(t *testing.T) {
			c := mustConnectAs(t, s, "admin", adminPassword, "admin", mech)
			coll := c.Database("app").Collection("c")
			if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "m", Value: mech}}); err != nil {
				t.Fatal(err)
			}
			var st bson.Raw
			if err := c.Database("admin").RunCommand(t.Context(), bson.D{{Key: "connectionStatus", Value: 1}}).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if u := st.Lookup("authInfo", "authenticatedUsers", "0", "user").StringValue(); u != "admin" {
				t.Fatalf("connectionStatus %v: authenticated user %q, want admin", st, u)
			}
		})
	}
	if st := s.AuthStats(); st.Successes == 0 {
		t.Fatalf("AuthStats %+v: no success counted", st)
	}
}

func TestAuthRejected(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	if err := root.Database("admin").RunCommand(t.Context(), bson.D{
		{Key: "createUser", Value: "only256"}, {Key: "pwd", Value: "pw-256"},
		{Key: "roles", Value: bson.A{}}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256"}},
	}).Err(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ user, pwd, mech string }{
		"wrong password":         {"admin", "not-the-password", "SCRAM-SHA-256"},
		"wrong password sha1":    {"admin", "not-the-password", "SCRAM-SHA-1"},
		"unknown user":           {"nobody", "whatever", "SCRAM-SHA-256"},
		"user lacks a mechanism": {"only256", "pw-256", "SCRAM-SHA-1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := connectAs(t, s, tc.user, tc.pwd, "admin", tc.mech)
			wantCode(t, err, 18, "Authentication failed")
		})
	}
	st := s.AuthStats()
	if st.Failures["wrong_password"] < 2 || st.Failures["unknown_user"] < 1 || st.UserFailures["admin.admin"] < 2 {
		t.Fatalf("AuthStats %+v: failures not counted by reason and user", st)
	}
	if _, ok := st.UserFailures["admin.nobody"]; ok {
		t.Fatalf("AuthStats %+v: an unknown user is counted by name", st)
	}
}

// TestAuthRequired: before authentication only the handshake is answered.
func TestAuthRequired(t *testing.T) {
	s := startAuth(t)
	anon := testenv.MongoClient(t, s.URI())
	if err := anon.Ping(t.Context(), nil); err != nil {
		t.Fatalf("ping before authentication: %v", err)
	}
	db := anon.Database("app")
	_, err := db.Collection("c").InsertOne(t.Context(), bson.D{{Key: "x", Value: 1}})
	wantCode(t, err, 13, "Command insert requires authentication")
	_, err = db.Collection("c").Find(t.Context(), bson.D{})
	wantCode(t, err, 13, "Command find requires authentication")
	_, err = anon.ListDatabaseNames(t.Context(), bson.D{})
	wantCode(t, err, 13, "requires authentication")
	_, err = db.Collection("c").Watch(t.Context(), mongo.Pipeline{})
	wantCode(t, err, 13, "Command aggregate requires authentication")
}

func TestAuthRoles(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "a", "reader", "pw-r", "read")
	createUser(t, root, "a", "writer", "pw-w", "readWrite")
	createUser(t, root, "b", "other", "pw-o", "readWrite")
	createUser(t, root, "admin", "watcher", "pw-x", "readAnyDatabase")
	if _, err := root.Database("a").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	reader := mustConnectAs(t, s, "reader", "pw-r", "a", "SCRAM-SHA-256")
	rc := reader.Database("a").Collection("c")
	if n, err := rc.CountDocuments(t.Context(), bson.D{}); err != nil || n != 1 {
		t.Fatalf("reader count = %d, %v", n, err)
	}
	_, err := rc.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 2}})
	wantCode(t, err, 13, `not authorized on a to execute command { insert: "c"`)
	_, err = rc.DeleteMany(t.Context(), bson.D{})
	wantCode(t, err, 13, "not authorized on a")
	wantCode(t, rc.Drop(t.Context()), 13, "not authorized on a")
	cs, err := rc.Watch(t.Context(), mongo.Pipeline{})
	if err != nil {
		t.Fatalf("reader watch a.c: %v", err)
	}
	cs.Close(t.Context())

	writer := mustConnectAs(t, s, "writer", "pw-w", "a", "SCRAM-SHA-1")
	if _, err := writer.Database("a").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 3}}); err != nil {
		t.Fatalf("writer insert: %v", err)
	}
	_, err = writer.Database("b").Collection("c").InsertOne(t.Context(), bson.D{{Key: "_id", Value: 3}})
	wantCode(t, err, 13, "not authorized on b")
	// $out into a database the user may not write.
	_, err = writer.Database("a").Collection("c").Aggregate(t.Context(), mongo.Pipeline{{{Key: "$out", Value: bson.D{{Key: "db", Value: "b"}, {Key: "coll", Value: "x"}}}}})
	wantCode(t, err, 13, "not authorized on a")

	other := mustConnectAs(t, s, "other", "pw-o", "b", "")
	oa := other.Database("a")
	_, err = oa.Collection("c").Find(t.Context(), bson.D{})
	wantCode(t, err, 13, "not authorized on a")
	_, err = oa.Collection("c").Watch(t.Context(), mongo.Pipeline{})
	wantCode(t, err, 13, "not authorized on a")
	_, err = oa.Watch(t.Context(), mongo.Pipeline{})
	wantCode(t, err, 13, "not authorized on a")
	_, err = other.Watch(t.Context(), mongo.Pipeline{})
	wantCode(t, err, 13, "not authorized on admin")
	// $lookup from a collection of a database the user may not read.
	_, err = other.Database("b").Collection("c").Aggregate(t.Context(), mongo.Pipeline{{{Key: "$lookup", Value: bson.D{
		{Key: "from", Value: "secret"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$unionWith", Value: "x"}}}}, {Key: "as", Value: "j"},
	}}}})
	if err != nil {
		t.Fatalf("lookup within b: %v", err)
	}
	names, err := other.ListDatabaseNames(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "a" {
			t.Fatalf("listDatabases for a user of b shows a: %v", names)
		}
	}

	watcher := mustConnectAs(t, s, "watcher", "pw-x", "admin", "")
	cs, err = watcher.Watch(t.Context(), mongo.Pipeline{})
	if err != nil {
		t.Fatalf("readAnyDatabase cluster-wide watch: %v", err)
	}
	cs.Close(t.Context())
	_, err = watcher.Database("a").Collection("c").InsertOne(t.Context(), bson.D{})
	wantCode(t, err, 13, "not authorized on a")
}

func TestAuthCursorOwner(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "a", "u1", "pw-1", "read")
	createUser(t, root, "a", "u2", "pw-2", "read")
	docs := []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
	if _, err := root.Database("a").Collection("c").InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	u1 := mustConnectAs(t, s, "u1", "pw-1", "a", "")
	var first bson.Raw
	if err := u1.Database("a").RunCommand(t.Context(), bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}).Decode(&first); err != nil {
		t.Fatal(err)
	}
	id := first.Lookup("cursor", "id").Int64()
	u2 := mustConnectAs(t, s, "u2", "pw-2", "a", "")
	err := u2.Database("a").RunCommand(t.Context(), bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err()
	wantCode(t, err, 13, "was not created by the authenticated user")
	err = u2.Database("a").RunCommand(t.Context(), bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id}}}).Err()
	wantCode(t, err, 13, "not authorized on a")
	if err := u1.Database("a").RunCommand(t.Context(), bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}).Err(); err != nil {
		t.Fatalf("owner's getMore: %v", err)
	}
}

func TestAuthUsersSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	const pw = "Second-user-pw-77c3"
	func() {
		s := startAuth(t, func(c *mongowire.Config) { c.DataDir = dir })
		root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
		createUser(t, root, "app", "svc", pw, "readWrite")
		if err := root.Database("admin").RunCommand(t.Context(), bson.D{{Key: "updateUser", Value: "admin"}, {Key: "pwd", Value: adminPassword}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	// The restarted server gets no admin password: users come from the disk.
	s := testenv.MongoWire(t, func(c *mongowire.Config) { c.DataDir = dir; c.Auth = true; c.AuthFailureDelay = -1 })
	mustConnectAs(t, s, "admin", adminPassword, "admin", "SCRAM-SHA-256")
	svc := mustConnectAs(t, s, "svc", pw, "app", "SCRAM-SHA-1")
	if _, err := svc.Database("app").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	_, err := connectAs(t, s, "svc", "wrong", "app", "")
	wantCode(t, err, 18, "Authentication failed")

	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, secret := range []string{adminPassword, pw} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the password %q", filepath.Base(path), secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLocalhostException(t *testing.T) {
	s := testenv.MongoWire(t, func(c *mongowire.Config) { c.Auth = true })
	anon := testenv.MongoClient(t, s.URI())
	_, err := anon.Database("app").Collection("c").InsertOne(t.Context(), bson.D{})
	wantCode(t, err, 13, "requires authentication")
	err = anon.Database("app").RunCommand(t.Context(), bson.D{{Key: "createUser", Value: "x"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}}).Err()
	wantCode(t, err, 13, "requires authentication")
	createUser(t, anon, "admin", "first", "first-pw", "root")
	// The exception closes with the first user.
	err = anon.Database("admin").RunCommand(t.Context(), bson.D{{Key: "createUser", Value: "second"}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{"root"}}}).Err()
	wantCode(t, err, 13, "requires authentication")
	c := mustConnectAs(t, s, "first", "first-pw", "admin", "")
	if _, err := c.Database("app").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
}

func TestUserCommands(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	db := root.Database("app")
	createUser(t, root, "app", "bob", "bob-pw", "read", bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "other"}})
	cmdErr := func(cmd bson.D) error { return db.RunCommand(t.Context(), cmd).Err() }

	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}}), 51003, `User "bob@app" already exists`)
	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "eve"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{"nosuchrole"}}}), 31, "Could not find role: nosuchrole@app")
	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "eve"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{"root"}}}), 31, "Could not find role: root@app")
	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "eve"}, {Key: "roles", Value: bson.A{}}}), 2, "Must provide a 'pwd' field")
	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "eve"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}, {Key: "mechanisms", Value: bson.A{"PLAIN"}}}), 2, "Unknown auth mechanism")
	wantCode(t, cmdErr(bson.D{{Key: "createUser", Value: "eve"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{}}, {Key: "authenticationRestrictions", Value: bson.A{}}}), 40415, "unknown field")
	wantCode(t, cmdErr(bson.D{{Key: "updateUser", Value: "nobody"}, {Key: "pwd", Value: "x"}}), 11, `Could not find user "nobody" for db "app"`)
	wantCode(t, cmdErr(bson.D{{Key: "updateUser", Value: "bob"}}), 2, "Must specify at least one field")
	wantCode(t, cmdErr(bson.D{{Key: "updateUser", Value: "bob"}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}, {Key: "pwd", Value: ""}}), 2, "Password cannot be empty")
	wantCode(t, cmdErr(bson.D{{Key: "dropUser", Value: "nobody"}}), 11, "Could not find user")
	wantCode(t, cmdErr(bson.D{{Key: "grantRolesToUser", Value: "nobody"}, {Key: "roles", Value: bson.A{"read"}}}), 11, "Could not find user")

	usersInfo := func(arg any, extra ...bson.E) bson.Raw {
		t.Helper()
		var r bson.Raw
		if err := db.RunCommand(t.Context(), append(bson.D{{Key: "usersInfo", Value: arg}}, extra...)).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, arg := range map[string]any{
		"1": 1, "name": "bob", "doc": bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "app"}}, "array": bson.A{"bob"},
	} {
		r := usersInfo(arg)
		if r.Lookup("users", "0", "_id").StringValue() != "app.bob" {
			t.Fatalf("usersInfo %s: %v", name, r)
		}
		if _, err := r.LookupErr("users", "0", "credentials"); err == nil {
			t.Fatalf("usersInfo %s shows credentials without showCredentials: %v", name, r)
		}
	}
	r := usersInfo("bob", bson.E{Key: "showCredentials", Value: true}, bson.E{Key: "showPrivileges", Value: true})
	if _, err := r.LookupErr("users", "0", "credentials", "SCRAM-SHA-256", "storedKey"); err != nil {
		t.Fatalf("usersInfo showCredentials: %v", r)
	}
	if _, err := r.LookupErr("users", "0", "inheritedPrivileges"); err != nil {
		t.Fatalf("usersInfo showPrivileges: %v", r)
	}

	if err := cmdErr(bson.D{{Key: "revokeRolesFromUser", Value: "bob"}, {Key: "roles", Value: bson.A{"read"}}}); err != nil {
		t.Fatal(err)
	}
	if err := cmdErr(bson.D{{Key: "grantRolesToUser", Value: "bob"}, {Key: "roles", Value: bson.A{"dbAdmin"}}}); err != nil {
		t.Fatal(err)
	}
	roles := usersInfo("bob").Lookup("users", "0", "roles").String()
	if strings.Contains(roles, `"read"`) || !strings.Contains(roles, "dbAdmin") || !strings.Contains(roles, "readWrite") {
		t.Fatalf("roles after revoke read, grant dbAdmin: %s", roles)
	}

	// A connection sees a role change at its next command.
	bob := mustConnectAs(t, s, "bob", "bob-pw", "app", "")
	if err := bob.Database("app").RunCommand(t.Context(), bson.D{{Key: "create", Value: "made"}}).Err(); err != nil {
		t.Fatalf("dbAdmin create: %v", err)
	}
	if err := cmdErr(bson.D{{Key: "revokeRolesFromUser", Value: "bob"}, {Key: "roles", Value: bson.A{"dbAdmin"}}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, bob.Database("app").RunCommand(t.Context(), bson.D{{Key: "create", Value: "made2"}}).Err(), 13, "not authorized on app")
	// ... and a dropped user is logged out.
	if err := cmdErr(bson.D{{Key: "dropUser", Value: "bob"}}); err != nil {
		t.Fatal(err)
	}
	_, err := bob.Database("other").Collection("c").InsertOne(t.Context(), bson.D{})
	wantCode(t, err, 13, "requires authentication")

	createUser(t, root, "app", "c1", "p")
	createUser(t, root, "app", "c2", "p")
	var n bson.Raw
	if err := db.RunCommand(t.Context(), bson.D{{Key: "dropAllUsersFromDatabase", Value: 1}}).Decode(&n); err != nil || n.Lookup("n").Int32() != 2 {
		t.Fatalf("dropAllUsersFromDatabase = %v, %v", n, err)
	}

	var ri bson.Raw
	if err := db.RunCommand(t.Context(), bson.D{{Key: "rolesInfo", Value: bson.A{"read", "nosuch", bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: "admin"}}}}, {Key: "showPrivileges", Value: true}}).Decode(&ri); err != nil {
		t.Fatal(err)
	}
	if got := ri.Lookup("roles").String(); !strings.Contains(got, `"role": "read","db": "app"`) || !strings.Contains(got, `"role": "root"`) || strings.Contains(got, "nosuch") || !strings.Contains(got, "changeStream") {
		t.Fatalf("rolesInfo: %s", got)
	}
	if err := db.RunCommand(t.Context(), bson.D{{Key: "rolesInfo", Value: 1}, {Key: "showBuiltinRoles", Value: true}}).Decode(&ri); err != nil {
		t.Fatal(err)
	}
	if n, _ := ri.Lookup("roles").Array().Values(); len(n) != 4 { // read, readWrite, dbAdmin, userAdmin outside admin
		t.Fatalf("rolesInfo showBuiltinRoles in app: %v", ri)
	}

	// Direct writes to admin.system.users are refused, whoever asks.
	_, err = root.Database("admin").Collection("system.users").InsertOne(t.Context(), bson.D{{Key: "_id", Value: "admin.evil"}})
	wantCode(t, err, 73, "cannot write to 'admin.system.users'")
	wantCode(t, root.Database("admin").Collection("system.users").Drop(t.Context()), 73, "system.users")
}

func TestLogout(t *testing.T) {
	s := startAuth(t)
	// One connection, so that logout and the next command share it.
	c := testenv.MongoClient(t, userURI(s, "admin", adminPassword, "admin", "")+"&maxPoolSize=1")
	db := c.Database("admin")
	if err := db.RunCommand(t.Context(), bson.D{{Key: "logout", Value: 1}}).Err(); err != nil {
		t.Fatal(err)
	}
	var st bson.Raw
	if err := db.RunCommand(t.Context(), bson.D{{Key: "connectionStatus", Value: 1}, {Key: "showPrivileges", Value: true}}).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.Lookup("authInfo", "authenticatedUsers").Array().Values(); len(n) != 0 {
		t.Fatalf("connectionStatus after logout: %v", st)
	}
	_, err := db.Collection("c").InsertOne(t.Context(), bson.D{})
	wantCode(t, err, 13, "requires authentication")
}

// TestAuthOff: without Auth nothing is checked, but users still work.
func TestAuthOff(t *testing.T) {
	s, anon := setup(t)
	if _, err := anon.Database("x").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	createUser(t, anon, "x", "u", "pw-u", "read")
	c := mustConnectAs(t, s, "u", "pw-u", "x", "")
	if _, err := c.Database("x").Collection("c").InsertOne(t.Context(), bson.D{}); err != nil {
		t.Fatalf("insert by a read user without Auth: %v", err)
	}
	_, err := connectAs(t, s, "u", "wrong", "x", "")
	wantCode(t, err, 18, "Authentication failed")
}

func TestAdminUserNeedsPassword(t *testing.T) {
	s := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0", Auth: true, AdminUser: "admin"})
	err := s.Start()
	if err == nil {
		s.Close()
		t.Fatal("Start with an admin user and no password succeeded")
	}
	if !strings.Contains(err.Error(), `admin user "admin": no password`) {
		t.Fatalf("Start: %v", err)
	}
	s.Close()
}

func TestAuthDriverOptions(t *testing.T) {
	// Credentials given as options rather than in the URI.
	s := startAuth(t)
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetAuth(options.Credential{
		AuthMechanism: "SCRAM-SHA-256", AuthSource: "admin", Username: "admin", Password: adminPassword,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	if _, err := c.ListDatabaseNames(t.Context(), bson.D{}); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateUserCredentials(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "app", "u", "pw-old", "read")
	db := root.Database("app")
	if err := db.RunCommand(t.Context(), bson.D{{Key: "updateUser", Value: "u"}, {Key: "pwd", Value: "pw-new"}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := connectAs(t, s, "u", "pw-old", "app", "SCRAM-SHA-256")
	wantCode(t, err, 18, "Authentication failed")
	mustConnectAs(t, s, "u", "pw-new", "app", "SCRAM-SHA-1")
	// Without a new password, mechanisms may only shrink.
	if err := db.RunCommand(t.Context(), bson.D{{Key: "updateUser", Value: "u"}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256"}}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = connectAs(t, s, "u", "pw-new", "app", "SCRAM-SHA-1")
	wantCode(t, err, 18, "Authentication failed")
	mustConnectAs(t, s, "u", "pw-new", "app", "SCRAM-SHA-256")
	err = db.RunCommand(t.Context(), bson.D{{Key: "updateUser", Value: "u"}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}}).Err()
	wantCode(t, err, 2, "subset of previously set mechanisms")
}

// TestSASLprep: SCRAM-SHA-256 prepares the password (a soft hyphen maps
// to nothing), so both spellings authenticate; SCRAM-SHA-1 hashes it as given.
func TestSASLprep(t *testing.T) {
	s := startAuth(t)
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "app", "u", "pässw\u00adörd", "read")
	mustConnectAs(t, s, "u", "pässw\u00adörd", "app", "SCRAM-SHA-256")
	mustConnectAs(t, s, "u", "pässwörd", "app", "SCRAM-SHA-256")
	mustConnectAs(t, s, "u", "pässw\u00adörd", "app", "SCRAM-SHA-1")
	_, err := connectAs(t, s, "u", "pässwörd", "app", "SCRAM-SHA-1")
	wantCode(t, err, 18, "Authentication failed")
}
