package store

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"
)

// TestPersistReplaysAnyHistory runs random write sequences (with failing
// writes and compactions among them) on a durable store and requires the
// same documents, indexes, catalog and oplog after a restart.
func TestPersistReplaysAnyHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes many small data directories; skipped with -short")
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		s, err := Open(Config{Dir: dir})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }() // the store open at the time
		colls := []Namespace{{"db", "a"}, {"db", "b"}, {"db2", "c"}}
		id := func() int32 { return int32(rapid.IntRange(0, 6).Draw(rt, "id")) }
		for range rapid.IntRange(1, 30).Draw(rt, "ops") {
			ns := rapid.SampledFrom(colls).Draw(rt, "ns")
			switch op := rapid.IntRange(0, 11).Draw(rt, "op"); op {
			case 0, 1, 2:
				n := rapid.IntRange(1, 3).Draw(rt, "batch")
				docs := make([]bson.Raw, n)
				for i := range docs {
					docs[i] = raw(rt, bson.D{{Key: "_id", Value: id()}, {Key: "k", Value: id()}, {Key: "arr", Value: bson.A{id(), id()}}})
				}
				s.Insert(ns, docs, rapid.Bool().Draw(rt, "ordered"))
			case 3, 4:
				typ, data, _ := bson.MarshalValue(rapid.SampledFrom([]bson.D{
					{{Key: "$inc", Value: bson.D{{Key: "k", Value: 1}}}},
					{{Key: "$push", Value: bson.D{{Key: "arr", Value: 9}}}},
					{{Key: "$pop", Value: bson.D{{Key: "arr", Value: 1}}}},
					{{Key: "$unset", Value: bson.D{{Key: "arr", Value: ""}}}},
					{{Key: "$set", Value: bson.D{{Key: "n.m", Value: "x"}}}},
					{{Key: "r", Value: true}},
				}).Draw(rt, "update"))
				s.Update(ns, UpdateSpec{Filter: raw(rt, bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: id()}}}}), Update: bson.RawValue{Type: typ, Value: data},
					Multi: typ == bson.TypeEmbeddedDocument && rapid.Bool().Draw(rt, "multi") && bson.Raw(data).Index(0).Key()[0] == '$', Upsert: rapid.Bool().Draw(rt, "upsert")})
			case 5:
				s.Delete(ns, raw(rt, bson.D{{Key: "_id", Value: id()}}), rapid.IntRange(0, 1).Draw(rt, "limit"))
			case 6:
				s.CreateIndexes(ns, []IndexSpec{{Key: bson.D{{Key: rapid.SampledFrom([]string{"k", "arr"}).Draw(rt, "field"), Value: 1}}, Unique: rapid.Bool().Draw(rt, "unique")}})
			case 7:
				s.DropIndexes(ns, []string{"*"})
			case 8:
				s.Rename(ns, rapid.SampledFrom(colls).Draw(rt, "to"), rapid.Bool().Draw(rt, "dropTarget"))
			case 9:
				s.CollMod(ns, bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: rapid.Bool().Draw(rt, "pre")}}}})
			case 10:
				if rapid.Bool().Draw(rt, "dropDatabase") {
					s.DropDatabase(ns.DB)
				} else {
					s.Drop(ns)
				}
			case 11:
				if err := s.compact(); err != nil {
					rt.Fatal(err)
				}
			}
		}
		want := state(rt, s)
		if err := s.Close(); err != nil {
			rt.Fatal(err)
		}
		s, err = Open(Config{Dir: dir})
		if err != nil {
			rt.Fatal(err)
		}
		if got := state(rt, s); got != want {
			rt.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
		}
	})
}
