package mongowire_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPymongoTour: what a pymongo user does first — server_info,
// list_database_names, bulk_write, aggregate, indexes, a change stream, a
// transaction, the status commands — against the embedded server. It
// skips when no python has pymongo (Debian's python3-pymongo is 3.11),
// unless TIDE_REQUIRE_PYMONGO=1.
func TestPymongoTour(t *testing.T) {
	py := pymongoPython(t)
	s, _ := setup(t)
	script := `
import sys, pymongo
from pymongo import InsertOne, UpdateOne, DeleteOne, ReplaceOne
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
info = c.server_info()
assert info["version"].startswith("7.0") and info["versionArray"][0] == 7, info
db = c.tour
db.c.insert_one({"_id": 0})
names = c.list_database_names()
assert "tour" in names and "local" in names, names
r = db.c.bulk_write([InsertOne({"_id": 1, "a": 1}), InsertOne({"_id": 2, "a": 2}),
    UpdateOne({"_id": 1}, {"$set": {"a": 10}}), ReplaceOne({"_id": 2}, {"b": 1}),
    DeleteOne({"_id": 0}), UpdateOne({"_id": 4}, {"$inc": {"a": 1}}, upsert=True)])
assert (r.inserted_count, r.matched_count, r.modified_count, r.deleted_count, r.upserted_ids) == (2, 2, 2, 1, {5: 4}), r.bulk_api_result
agg = list(db.c.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}, "a": {"$sum": "$a"}}}]))
assert agg == [{"_id": None, "n": 3, "a": 11}], agg
assert db.c.create_index([("a", 1)], unique=True, sparse=True, name="ua") == "ua"
assert sorted(db.c.index_information()) == ["_id_", "ua"], db.c.index_information()
with db.c.watch() as cs:
    db.c.insert_one({"_id": 9})
    ev = next(cs)
    assert ev["operationType"] == "insert" and ev["documentKey"] == {"_id": 9}, ev
with c.start_session() as s:
    with s.start_transaction():
        db.c.insert_one({"_id": 20}, session=s)
        assert db.c.count_documents({"_id": 20}) == 0
assert db.c.count_documents({"_id": 20}) == 1
st = c.admin.command("serverStatus")
assert st["uptime"] == int(st["uptime"]) and st["opcounters"]["insert"] >= 4, st
assert db.command("dbstats")["collections"] == 1
assert db.command("collstats", "c")["count"] == 5
rs = c.admin.command("replSetGetStatus")
assert rs["set"] == "rs0" and rs["myState"] == 1, rs
first = c.local["oplog.rs"].find_one(sort=[("$natural", -1)])
assert first["op"] in ("i", "c", "u") and "ts" in first, first
print("tour ok")
`
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, s.URI()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tour ok") {
		t.Fatalf("pymongo tour: %v\n%s", err, out)
	}
}

// TestPymongoCollationTextTimeseries: the collation examples of pymongo's
// documentation (Collation, CollationStrength), a text index with its
// score sorted as pymongo spells it, and a time-series collection.
func TestPymongoCollationTextTimeseries(t *testing.T) {
	py := pymongoPython(t)
	s, _ := setup(t)
	script := `
import sys, datetime, pymongo
from pymongo.collation import Collation, CollationStrength
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
db = c.pydocs
db.create_collection("contacts", collation=Collation(locale="fr_CA"))
db.contacts.create_index("name", unique=True)
spec = db.contacts.index_information()["name_1"]["collation"]
assert spec["locale"] == "fr_CA" and spec["backwards"] is True, spec
db.people.insert_many([{"first_name": "jürgen"}, {"first_name": "Jürgen"}, {"first_name": "jurgen"}])
r = db.people.update_many({"first_name": "jürgen"}, {"$set": {"verified": 1}},
    collation=Collation(locale="de", strength=CollationStrength.SECONDARY))
assert r.modified_count == 2, r.raw_result
n = db.people.count_documents({"first_name": "JURGEN"}, collation=Collation(locale="de", strength=CollationStrength.PRIMARY))
assert n == 3, n
db.articles.create_index([("subject", pymongo.TEXT)])
db.articles.insert_many([{"_id": 1, "subject": "coffee"}, {"_id": 2, "subject": "Coffee Shopping"}, {"_id": 3, "subject": "Baking a cake"}])
res = list(db.articles.find({"$text": {"$search": "coffee"}}, {"score": {"$meta": "textScore"}}).sort([("score", {"$meta": "textScore"})]))
assert [d["_id"] for d in res] == [1, 2] and res[0]["score"] > res[1]["score"], res
db.create_collection("weather", timeseries={"timeField": "timestamp", "metaField": "metadata", "granularity": "hours"})
db.weather.insert_many([{"metadata": {"sensorId": 5578}, "timestamp": datetime.datetime(2021, 5, 18, h), "temp": 12 + h} for h in range(3)])
info = [x for x in db.list_collections() if x["name"] == "weather"][0]
assert info["type"] == "timeseries" and info["options"]["timeseries"]["granularity"] == "hours", info
assert db.weather.count_documents({"metadata.sensorId": 5578}) == 3
print("docs ok")
`
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, s.URI()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "docs ok") {
		t.Fatalf("pymongo: %v\n%s", err, out)
	}
}
