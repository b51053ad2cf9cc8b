package mongowire_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
)

// uidOf is mongod's uid of a user's sessions: the SHA-256 of "name@db".
func uidOf(user, db string) bson.Binary {
	sum := sha256.Sum256([]byte(user + "@" + db))
	return bson.Binary{Data: sum[:]}
}

// openTxn starts a session of c with a transaction that inserted _id id
// into db1.c, and returns the session and its lsid's id.
func openTxn(t *testing.T, c *mongo.Client, id string) (*mongo.Session, bson.Binary) {
	t.Helper()
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.EndSession(context.Background()) })
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sc := mongo.NewSessionContext(t.Context(), sess)
	if _, err := c.Database("db1").Collection("c").InsertOne(sc, bson.D{{Key: "_id", Value: id}}); err != nil {
		t.Fatalf("insert %s in a transaction: %v", id, err)
	}
	sub, data := sess.ID().Lookup("id").Binary()
	return sess, bson.Binary{Subtype: sub, Data: data}
}

// openReadTxn starts a session of c with a transaction that read db1.c.
func openReadTxn(t *testing.T, c *mongo.Client) (*mongo.Session, bson.Binary) {
	t.Helper()
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.EndSession(context.Background()) })
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	sc := mongo.NewSessionContext(t.Context(), sess)
	if err := c.Database("db1").Collection("c").FindOne(sc, bson.D{}).Err(); err != nil && err != mongo.ErrNoDocuments {
		t.Fatalf("find in a transaction: %v", err)
	}
	sub, data := sess.ID().Lookup("id").Binary()
	return sess, bson.Binary{Subtype: sub, Data: data}
}

// listSessions runs $listLocalSessions with spec on db and returns the
// sessions' _id documents.
func listSessions(ctx context.Context, db *mongo.Database, spec bson.D) ([]bson.Raw, error) {
	cur, err := db.Aggregate(ctx, mongo.Pipeline{{{Key: "$listLocalSessions", Value: spec}}})
	if err != nil {
		return nil, err
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	return docs, nil
}

// listed returns the record of the session with id and uid, or nil.
func listed(docs []bson.Raw, id, uid bson.Binary) bson.Raw {
	for _, d := range docs {
		_, gotID := d.Lookup("_id", "id").Binary()
		_, gotUID := d.Lookup("_id", "uid").Binary()
		if bytes.Equal(gotID, id.Data) && bytes.Equal(gotUID, uid.Data) {
			return d
		}
	}
	return nil
}

// txnStatement runs cmd on db as statement number of lsid's transaction.
func txnStatement(ctx context.Context, db *mongo.Database, cmd bson.D, lsid bson.D, number int64, extra ...bson.E) error {
	cmd = append(cmd, bson.E{Key: "lsid", Value: lsid}, bson.E{Key: "txnNumber", Value: number}, bson.E{Key: "autocommit", Value: false})
	return db.RunCommand(ctx, append(cmd, extra...)).Err()
}

// TestSessionOwnership: a session belongs to the user who runs it. With
// the admin's transaction open, no user without listSessions sees it, no
// user without killAnySession ends, kills, commits or aborts it, and a
// connection that has not authenticated touches no session; the
// transaction then commits.
func TestSessionOwnership(t *testing.T) {
	s := startAuth(t)
	ctx := t.Context()
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "db1", "reader", "pw-r", "read")
	createUser(t, root, "db1", "writer", "pw-w", "readWrite")
	createUser(t, root, "db1", "dbadm", "pw-d", "dbAdmin")
	createUser(t, root, "admin", "monitor", "pw-m", "clusterMonitor")
	createUser(t, root, "admin", "manager", "pw-g", "clusterManager")
	// The collection exists before the transactions: one a transaction
	// creates is its own until the commit.
	if err := root.Database("db1").CreateCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}

	sess, adminID := openTxn(t, root, "admin's")
	adminUID := uidOf("admin", "admin")
	byID := bson.D{{Key: "id", Value: adminID}}
	byUID := bson.D{{Key: "id", Value: adminID}, {Key: "uid", Value: adminUID}}
	stillOpen := func(t *testing.T) {
		t.Helper()
		docs, err := listSessions(ctx, root.Database("admin"), bson.D{{Key: "allUsers", Value: true}})
		if err != nil {
			t.Fatal(err)
		}
		if listed(docs, adminID, adminUID) == nil {
			t.Fatalf("the admin's session is gone: %v", docs)
		}
	}
	commit := bson.D{{Key: "commitTransaction", Value: 1}}
	abort := bson.D{{Key: "abortTransaction", Value: 1}}

	for role, tc := range map[string]struct {
		user, pwd, db string
		mayList       bool // has listSessions
	}{
		"read":           {"reader", "pw-r", "db1", false},
		"readWrite":      {"writer", "pw-w", "db1", false},
		"dbAdmin":        {"dbadm", "pw-d", "db1", false},
		"clusterMonitor": {"monitor", "pw-m", "admin", true},
		"clusterManager": {"manager", "pw-g", "admin", true},
	} {
		t.Run(role, func(t *testing.T) {
			c := mustConnectAs(t, s, tc.user, tc.pwd, tc.db, "")
			admin := c.Database("admin")
			for _, spec := range []bson.D{
				{{Key: "allUsers", Value: true}},
				{{Key: "users", Value: bson.A{bson.D{{Key: "user", Value: "admin"}, {Key: "db", Value: "admin"}}}}},
			} {
				docs, err := listSessions(ctx, admin, spec)
				if !tc.mayList {
					wantCode(t, err, 13, "not authorized on admin to execute command { aggregate: ")
					continue
				}
				if err != nil {
					t.Fatalf("$listLocalSessions %v: %v", spec, err)
				}
				if d := listed(docs, adminID, adminUID); d == nil || d.Lookup("user", "name").StringValue() != "admin@admin" {
					t.Fatalf("$listLocalSessions %v does not show the admin's session: %v", spec, docs)
				}
			}
			// Its own sessions, without any privilege, from any database.
			for _, db := range []string{"admin", tc.db} {
				docs, err := listSessions(ctx, c.Database(db), bson.D{})
				if err != nil {
					t.Fatalf("$listLocalSessions of its own on %s: %v", db, err)
				}
				for _, d := range docs {
					if _, uid := d.Lookup("_id", "uid").Binary(); !bytes.Equal(uid, uidOf(tc.user, tc.db).Data) {
						t.Fatalf("$listLocalSessions {} shows another user's session: %v", d)
					}
				}
			}

			// Naming the admin's session by its uid.
			for _, cmd := range []bson.D{
				{{Key: "killSessions", Value: bson.A{byUID}}},
				{{Key: "endSessions", Value: bson.A{byUID}}},
			} {
				wantCode(t, admin.RunCommand(ctx, cmd).Err(), 13, "Unauthorized to set user digest in LogicalSessionId")
			}
			wantCode(t, txnStatement(ctx, admin, commit, byUID, 1), 13, "Unauthorized to set user digest in LogicalSessionId")
			wantCode(t, txnStatement(ctx, admin, abort, byUID, 1), 13, "Unauthorized to set user digest in LogicalSessionId")
			// Killing every session, or every session of the admin.
			for _, cmd := range []bson.D{
				{{Key: "killAllSessions", Value: bson.A{}}},
				{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "admin"}, {Key: "db", Value: "admin"}}}}},
				{{Key: "killAllSessionsByPattern", Value: bson.A{}}},
				{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "uid", Value: adminUID}}}}},
				{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "lsid", Value: byUID}}}}},
			} {
				wantCode(t, admin.RunCommand(ctx, cmd).Err(), 13, "not authorized on admin to execute command { "+cmd[0].Key)
			}
			// By its id alone, the session is the caller's of that id: not
			// the admin's, and one without a transaction.
			for _, cmd := range []bson.D{
				{{Key: "killSessions", Value: bson.A{byID}}},
				{{Key: "endSessions", Value: bson.A{byID}}},
				{{Key: "killSessions", Value: bson.A{}}}, // all the caller's
			} {
				if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
			}
			wantCode(t, txnStatement(ctx, admin, commit, byID, 1), 251, "does not match any in-progress transactions")
			wantCode(t, txnStatement(ctx, admin, abort, byID, 1), 251, "does not match any in-progress transactions")
			stillOpen(t)
		})
	}

	t.Run("unauthenticated", func(t *testing.T) {
		anon := testenv.MongoClient(t, s.URI())
		admin := anon.Database("admin")
		for _, cmd := range []bson.D{
			{{Key: "endSessions", Value: bson.A{byID}}},
			{{Key: "endSessions", Value: bson.A{byUID}}},
			{{Key: "killSessions", Value: bson.A{byUID}}},
			{{Key: "killAllSessions", Value: bson.A{}}},
		} {
			wantCode(t, admin.RunCommand(ctx, cmd).Err(), 13, "Command "+cmd[0].Key+" requires authentication")
		}
		wantCode(t, txnStatement(ctx, admin, abort, byID, 1), 13, "Command abortTransaction requires authentication")
		// The handshake's commands still run, and an lsid on them, even
		// naming the admin's session by its uid, is ignored as on mongod.
		if err := admin.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}, {Key: "lsid", Value: byUID}}).Err(); err != nil {
			t.Fatalf("ping before authentication: %v", err)
		}
		stillOpen(t)
	})

	// The same id from another user names another session: its own
	// transaction number 1 starts and commits beside the admin's.
	writer := mustConnectAs(t, s, "writer", "pw-w", "db1", "")
	ins := bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "writer's"}}}}}
	if err := txnStatement(ctx, writer.Database("db1"), ins, byID, 1, bson.E{Key: "startTransaction", Value: true}); err != nil {
		t.Fatalf("the writer's transaction on a session of the same id: %v", err)
	}
	if err := txnStatement(ctx, writer.Database("admin"), commit, byID, 1); err != nil {
		t.Fatalf("commit of the writer's transaction: %v", err)
	}

	stillOpen(t)
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatalf("the admin's transaction after the attacks: %v", err)
	}
	n, err := root.Database("db1").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"admin's", "writer's"}}}}})
	if err != nil || n != 2 {
		t.Fatalf("%d of the two committed documents (%v)", n, err)
	}
}

// TestSessionKillAllowed: a user ends and kills its own sessions; root
// and hostManager (killAnySession) kill anyone's, named by the _id
// $listLocalSessions shows, by user or by pattern.
func TestSessionKillAllowed(t *testing.T) {
	s := startAuth(t)
	ctx := t.Context()
	root := mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	createUser(t, root, "db1", "reader", "pw-r", "read")
	createUser(t, root, "admin", "host", "pw-h", "hostManager")
	reader := mustConnectAs(t, s, "reader", "pw-r", "db1", "")
	host := mustConnectAs(t, s, "host", "pw-h", "admin", "")
	readerUID := uidOf("reader", "db1")
	aborted := func(t *testing.T, sess *mongo.Session) {
		t.Helper()
		wantCode(t, sess.CommitTransaction(ctx), 251, "")
	}
	runOK := func(t *testing.T, c *mongo.Client, cmd bson.D) {
		t.Helper()
		if err := c.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	t.Run("own", func(t *testing.T) {
		sess, id := openReadTxn(t, reader)
		docs, err := listSessions(ctx, reader.Database("db1"), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if d := listed(docs, id, readerUID); d == nil || d.Lookup("user", "name").StringValue() != "reader@db1" {
			t.Fatalf("the reader's own session is not listed: %v", docs)
		}
		runOK(t, reader, bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "id", Value: id}}}}})
		if docs, _ := listSessions(ctx, reader.Database("db1"), bson.D{}); listed(docs, id, readerUID) != nil {
			t.Fatalf("a killed session is still listed: %v", docs)
		}
		aborted(t, sess)

		// Its own uid may be named; endSessions and killSessions: [] too.
		sess, id = openReadTxn(t, reader)
		runOK(t, reader, bson.D{{Key: "endSessions", Value: bson.A{bson.D{{Key: "id", Value: id}, {Key: "uid", Value: readerUID}}}}})
		aborted(t, sess)
		sess, _ = openReadTxn(t, reader)
		rootSess, _ := openTxn(t, root, "root's")
		runOK(t, reader, bson.D{{Key: "killSessions", Value: bson.A{}}})
		aborted(t, sess)
		if err := rootSess.CommitTransaction(ctx); err != nil {
			t.Fatalf("killSessions: [] of the reader ended the root's transaction: %v", err)
		}
	})

	t.Run("root", func(t *testing.T) {
		sess, id := openReadTxn(t, reader)
		docs, err := listSessions(ctx, root.Database("admin"), bson.D{{Key: "allUsers", Value: true}})
		if err != nil {
			t.Fatal(err)
		}
		d := listed(docs, id, readerUID)
		if d == nil {
			t.Fatalf("root does not see the reader's session: %v", docs)
		}
		runOK(t, root, bson.D{{Key: "killSessions", Value: bson.A{d.Lookup("_id")}}})
		aborted(t, sess)

		sess, _ = openReadTxn(t, reader)
		rootSess, _ := openTxn(t, root, "root's 2")
		runOK(t, root, bson.D{{Key: "killAllSessions", Value: bson.A{bson.D{{Key: "user", Value: "reader"}, {Key: "db", Value: "db1"}}}}})
		aborted(t, sess)
		if err := rootSess.CommitTransaction(ctx); err != nil {
			t.Fatalf("killAllSessions of the reader ended the root's transaction: %v", err)
		}

		sess, id = openReadTxn(t, reader)
		rootSess, _ = openTxn(t, root, "root's 3")
		runOK(t, root, bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "lsid", Value: bson.D{{Key: "id", Value: id}, {Key: "uid", Value: readerUID}}}}}}})
		aborted(t, sess)
		sess, _ = openReadTxn(t, reader)
		runOK(t, root, bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "uid", Value: readerUID}}}}})
		aborted(t, sess)
		if err := rootSess.CommitTransaction(ctx); err != nil {
			t.Fatalf("killAllSessionsByPattern of the reader ended the root's transaction: %v", err)
		}
		wantCode(t, root.Database("admin").RunCommand(ctx, bson.D{{Key: "killAllSessionsByPattern", Value: bson.A{bson.D{{Key: "users", Value: bson.A{}}}}}}).Err(),
			13, "Not authorized to impersonate in killAllSessionsByPattern")
	})

	t.Run("hostManager", func(t *testing.T) {
		sess, id := openTxn(t, root, "killed")
		// hostManager kills but does not list (listSessions is monitoring).
		_, err := listSessions(ctx, host.Database("admin"), bson.D{{Key: "allUsers", Value: true}})
		wantCode(t, err, 13, "not authorized on admin")
		runOK(t, host, bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "id", Value: id}, {Key: "uid", Value: uidOf("admin", "admin")}}}}})
		aborted(t, sess)
		if n, _ := root.Database("db1").Collection("c").CountDocuments(ctx, bson.D{{Key: "_id", Value: "killed"}}); n != 0 {
			t.Fatal("the killed transaction's insert is visible")
		}
		sess, _ = openReadTxn(t, reader)
		runOK(t, host, bson.D{{Key: "killAllSessions", Value: bson.A{}}})
		aborted(t, sess)
	})
}

// TestSessionsWithoutAuth: without authentication every session is
// everyone's, as on mongod: any client ends or kills any session by id.
func TestSessionsWithoutAuth(t *testing.T) {
	s := testenv.MongoWire(t, func(*mongowire.Config) {})
	a := testenv.MongoClient(t, s.URI())
	b := testenv.MongoClient(t, s.URI())
	sess, id := openTxn(t, a, "a's")
	if err := b.Database("admin").RunCommand(t.Context(), bson.D{{Key: "killSessions", Value: bson.A{bson.D{{Key: "id", Value: id}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, sess.CommitTransaction(t.Context()), 251, "")
	sess, _ = openTxn(t, a, "a's 2")
	if err := b.Database("admin").RunCommand(t.Context(), bson.D{{Key: "killSessions", Value: bson.A{}}}).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, sess.CommitTransaction(t.Context()), 251, "")
}
