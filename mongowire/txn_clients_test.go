package mongowire_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestNodeWithTransaction: the Node.js driver's withTransaction commits,
// and a failing callback aborts. It uses the mongodb package mongosh ships
// (or one on NODE_PATH), and skips without it, as TestNodeDriverAuth.
func TestNodeWithTransaction(t *testing.T) {
	node, env := nodeDriver(t)
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
	py := pymongoPython(t)
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
