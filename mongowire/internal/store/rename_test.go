package store

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func collUUID(t *testing.T, s *Store, ns Namespace) bson.Binary {
	t.Helper()
	info, ok := s.Collection(ns)
	if !ok {
		t.Fatalf("collection %s missing", ns)
	}
	return info.UUID
}

// TestRenameUUID checks that a rename within a database keeps the
// collection's UUID and a rename to another database gives it a new one,
// with the oplog recording the copy as MongoDB does.
func TestRenameUUID(t *testing.T) {
	tests := map[string]struct {
		to         Namespace
		dropTarget bool
		newUUID    bool
		ops        string
	}{
		"same database":        {Namespace{"db", "b"}, false, false, "rename db.a"},
		"other database":       {Namespace{"db2", "b"}, false, true, "create tmp, createIndexes tmp, insert tmp, insert tmp, rename tmp, drop db.a"},
		"other database, drop": {Namespace{"db2", "t"}, true, true, "create tmp, createIndexes tmp, insert tmp, insert tmp, rename tmp, drop db.a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			pre := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
			if err := s.Create(nsA, pre); err != nil {
				t.Fatal(err)
			}
			seed(t, s, `{"_id": 1, "k": "x"}`, `{"_id": 2, "k": "y"}`)
			if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: int32(1)}}, Unique: true}}); err != nil {
				t.Fatal(err)
			}
			var oldTarget bson.Binary
			if tc.dropTarget {
				mustInsert(t, s, tc.to, bson.D{{Key: "_id", Value: 9}})
				oldTarget = collUUID(t, s, tc.to)
			}
			old := collUUID(t, s, nsA)
			start := s.Oplog().Newest()
			if err := s.Rename(nsA, tc.to, tc.dropTarget); err != nil {
				t.Fatal(err)
			}
			got := collUUID(t, s, tc.to)
			if !got.Equal(old) != tc.newUUID {
				t.Errorf("uuid %x after rename from %x; want new: %v", got.Data, old.Data, tc.newUUID)
			}
			if _, ok := s.Collection(nsA); ok {
				t.Error("source still exists")
			}
			if info, _ := s.Collection(tc.to); !info.PreAndPostImages {
				t.Error("options not kept")
			}
			if docs := find(t, s, tc.to, nil); len(docs) != 2 || docs[0].Lookup("k").StringValue() != "x" {
				t.Errorf("documents after rename: %v", docs)
			}
			specs, _ := s.ListIndexes(tc.to)
			if len(specs) != 2 || !specs[1].Unique {
				t.Errorf("indexes after rename: %+v", specs)
			}
			if n, errs := s.Insert(tc.to, []bson.Raw{js(t, `{"k": "x"}`)}, true); n != 0 || len(errs) != 1 {
				t.Errorf("unique index not enforced after rename: n=%d errs=%v", n, errs)
			}
			es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
			var ops []string
			for _, e := range es {
				ns := e.NS.String()
				if strings.HasPrefix(e.NS.Coll, "tmp") && strings.HasSuffix(e.NS.Coll, ".renameCollection") && e.NS.DB == tc.to.DB {
					ns = "tmp"
				}
				ops = append(ops, e.Op+" "+ns)
			}
			if got := strings.Join(ops, ", "); got != tc.ops {
				t.Errorf("oplog %s\nwant  %s", got, tc.ops)
			}
			for _, e := range es {
				switch e.Op {
				case "rename":
					if to, _ := lookupD(e.Extra, "to").(string); to != tc.to.String() {
						t.Errorf("rename to %v", e.Extra)
					}
					if dt, _ := lookupD(e.Extra, "dropTarget").(bson.Binary); tc.dropTarget && !dt.Equal(oldTarget) {
						t.Errorf("rename dropTarget %v, want %x", e.Extra, oldTarget.Data)
					}
					if !e.UUID.Equal(got) {
						t.Errorf("rename entry uuid %x, want the collection's %x", e.UUID.Data, got.Data)
					}
				case "drop":
					if !e.UUID.Equal(old) {
						t.Errorf("drop entry uuid %x, want the source's %x", e.UUID.Data, old.Data)
					}
				}
			}
		})
	}
}

// TestRenameAcrossDatabasesPersists checks that a collection renamed to
// another database comes back with its new UUID, documents and indexes.
func TestRenameAcrossDatabasesPersists(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, nil)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	to := Namespace{"other", "c"}
	if err := s.Rename(nsA, to, false); err != nil {
		t.Fatal(err)
	}
	want := state(t, s)
	uuid := collUUID(t, s, to)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir, nil)
	defer s.Close()
	if got := state(t, s); got != want {
		t.Errorf("after restart:\n%s\nwant\n%s", got, want)
	}
	if got := collUUID(t, s, to); !got.Equal(uuid) {
		t.Errorf("uuid %x after restart, want %x", got.Data, uuid.Data)
	}
	if dbs := fmt.Sprint(s.ListDatabases()); strings.Contains(dbs, "{db ") {
		t.Errorf("source database left: %s", dbs)
	}
}
