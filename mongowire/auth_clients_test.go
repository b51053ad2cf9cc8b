package mongowire_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMongoshAuth: mongosh authenticates with SCRAM-SHA-256, and a wrong
// password makes it fail with mongod's message.
func TestMongoshAuth(t *testing.T) {
	bin, err := exec.LookPath("mongosh")
	if err != nil {
		testenv.Need(t, "mongosh", fmt.Errorf("%w (npm install -g mongosh)", err))
	}
	s := startAuth(t)
	sh := func(pwd, script string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		uri := "mongodb://" + url.UserPassword("admin", pwd).String() + "@" + s.Addr() + "/app?directConnection=true&authSource=admin&authMechanism=SCRAM-SHA-256"
		cmd := exec.CommandContext(ctx, bin, uri, "--quiet", "--norc", "--eval", script)
		cmd.Env = append(os.Environ(), "MONGOSH_NO_TELEMETRY=1", "DO_NOT_TRACK=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := sh(adminPassword, `
db.c.insertOne({_id: 1});
db.getSiblingDB("app").createUser({user: "ro", pwd: "ro-pw", roles: ["read"]});
const st = db.runCommand({connectionStatus: 1});
print("user=" + st.authInfo.authenticatedUsers[0].user + " n=" + db.c.countDocuments({}));`)
	if err != nil || !strings.Contains(out, "user=admin n=1") {
		t.Fatalf("mongosh as admin: %v\n%s", err, out)
	}
	out, err = sh("wrong", `print("connected")`)
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("mongosh with a wrong password: %v\n%s", err, out)
	}
}

// TestNodeDriverAuth: the Node.js driver authenticates with SCRAM-SHA-256
// and SCRAM-SHA-1. It uses the mongodb package mongosh ships (or one on
// NODE_PATH); without node and that package it skips, saying so.
func TestNodeDriverAuth(t *testing.T) {
	node, env := nodeDriver(t)
	s := startAuth(t)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-1"} {
		t.Run(mech, func(t *testing.T) {
			uri := "mongodb://" + url.UserPassword("admin", adminPassword).String() + "@" + s.Addr() + "/?replicaSet=rs0&authSource=admin&authMechanism=" + mech
			script := `
const { MongoClient } = require('mongodb');
(async () => {
  const c = new MongoClient(process.argv[1], { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    await c.db('node').collection('c').insertOne({ m: process.argv[2] });
    const n = await c.db('node').collection('c').countDocuments({ m: process.argv[2] });
    console.log('count=' + n);
    const bad = new MongoClient(process.argv[1].replace(encodeURIComponent(process.argv[3]), 'wrong'), { serverSelectionTimeoutMS: 10000 });
    try { await bad.connect(); await bad.db('node').command({ ping: 1 }); console.log('bad=accepted'); }
    catch (e) { console.log('bad=' + e.code); }
    finally { await bad.close(); }
  } finally { await c.close(); }
})().catch((e) => { console.error(e); process.exit(1); });`
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "-e", script, uri, mech, adminPassword)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "count=1") || !strings.Contains(string(out), "bad=18") {
				t.Fatalf("node driver with %s: %v\n%s", mech, err, out)
			}
		})
	}
}
