package mongowire_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestNodeWithTransaction: the Node.js driver's withTransaction commits,
// and a failing callback aborts. It uses the mongodb package mongosh ships
// (or one on NODE_PATH), and skips without it, as TestNodeDriverAuth.
func TestNodeWithTransaction(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	nodePath := os.Getenv("NODE_PATH")
	if root, err := exec.Command("npm", "root", "-g").Output(); err == nil {
		nodePath = strings.Join([]string{nodePath, filepath.Join(strings.TrimSpace(string(root)), "mongosh", "node_modules"), strings.TrimSpace(string(root))}, string(os.PathListSeparator))
	}
	env := append(os.Environ(), "NODE_PATH="+nodePath)
	probe := exec.Command(node, "-e", "require.resolve('mongodb')")
	probe.Env = env
	if err := probe.Run(); err != nil {
		if os.Getenv("TIDE_REQUIRE_MONGOSH") == "1" {
			t.Fatal("the Node.js mongodb package is not found (it comes with mongosh), and TIDE_REQUIRE_MONGOSH=1 requires it")
		}
		t.Skip("the Node.js mongodb package is not on NODE_PATH nor inside a global mongosh")
	}
	s, client := setup(t)
	script := `
const { MongoClient } = require('mongodb');
(async () => {
  const c = new MongoClient(process.argv[1], { serverSelectionTimeoutMS: 10000 });
  try {
    await c.connect();
    const coll = c.db('node').collection('t');
    const s = c.startSession();
    await s.withTransaction(async () => {
      await coll.insertOne({ _id: 1 }, { session: s });
      await coll.insertOne({ _id: 2 }, { session: s });
      const outside = await coll.countDocuments({});
      if (outside !== 0) throw new Error('uncommitted writes visible: ' + outside);
    });
    try {
      await s.withTransaction(async () => {
        await coll.insertOne({ _id: 3 }, { session: s });
        throw new Error('callback fails');
      });
    } catch (e) { console.log('aborted=' + e.message); }
    await s.endSession();
    console.log('count=' + await coll.countDocuments({}));
  } finally { await c.close(); }
})().catch((e) => { console.error(e); process.exit(1); });`
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", script, s.URI())
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "count=2") || !strings.Contains(string(out), "aborted=callback fails") {
		t.Fatalf("node withTransaction: %v\n%s", err, out)
	}
	if n, _ := client.Database("node").Collection("t").CountDocuments(t.Context(), bson.D{}); n != 2 {
		t.Fatalf("%d documents, want 2", n)
	}
}

// TestPythonWithTransaction: pymongo's with_transaction commits. It skips
// when no python has pymongo.
func TestPythonWithTransaction(t *testing.T) {
	var py string
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(cand); err == nil && exec.Command(p, "-c", "import pymongo").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		if os.Getenv("TIDE_REQUIRE_PYMONGO") == "1" {
			t.Fatal("no python3 with pymongo, and TIDE_REQUIRE_PYMONGO=1 requires it (Debian: python3-pymongo)")
		}
		t.Skip("no python3 with pymongo")
	}
	s, _ := setup(t)
	script := `
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
coll = c.py.t
with c.start_session() as s:
    def cb(s):
        coll.insert_one({"_id": 1}, session=s)
        coll.update_one({"_id": 1}, {"$set": {"x": 1}}, session=s)
        assert coll.count_documents({}) == 0, "uncommitted writes visible"
        assert coll.count_documents({}, session=s) == 1
    s.with_transaction(cb)
print("doc=%s" % coll.find_one({"_id": 1}))
`
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, s.URI()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "doc={'_id': 1, 'x': 1}") {
		t.Fatalf("pymongo with_transaction: %v\n%s", err, out)
	}
}
