package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func openDir(t testing.TB, dir string, logw *bytes.Buffer) *Store {
	t.Helper()
	h := slog.DiscardHandler
	if logw != nil {
		h = slog.NewTextHandler(logw, nil)
	}
	s, err := Open(Config{Dir: dir, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// state renders everything observable about a store, to compare it across
// a restart.
func state(t tb, s *Store) string {
	t.Helper()
	var b strings.Builder
	for _, db := range s.ListDatabases() {
		for _, c := range s.ListCollections(db.Name) {
			ns := Namespace{db.Name, c.Name}
			fmt.Fprintf(&b, "%s uuid=%x opts=%v pre=%v\n", ns, c.UUID.Data, c.Options, c.PreAndPostImages)
			specs, _ := s.ListIndexes(ns)
			for _, sp := range specs {
				fmt.Fprintf(&b, "  index %s %v unique=%v sparse=%v %v\n", sp.Name, sp.Key, sp.Unique, sp.Sparse, sp.Options)
			}
			for _, d := range find(t, s, ns, nil) {
				fmt.Fprintf(&b, "  %s\n", d)
			}
		}
	}
	es, _, lost := s.Oplog().ReadAfter(bson.Timestamp{}, 0, 0)
	fmt.Fprintf(&b, "oplog lost=%v newest=%v\n", lost, s.Oplog().Newest())
	for _, e := range es {
		fmt.Fprintf(&b, "  %v %d %s %s %x %s %s %s %v %v\n", e.TS, e.Wall.UnixMilli(), e.Op, e.NS, e.UUID.Data, e.DocKey, e.Doc, e.Pre, e.Update, e.Extra)
	}
	return b.String()
}

func TestPersistRestart(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, nil)
	pre := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	if err := s.Create(nsA, pre); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "x"}}, bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "y"}}, bson.D{{Key: "k", Value: "z"}})
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: 1}}, Unique: true}, {Key: bson.D{{Key: "j", Value: -1}}, Sparse: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropIndexes(nsA, []string{"j_-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(nsA, raw(t, bson.D{{Key: "_id", Value: 2}}), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"_id": 1}`), Update: jsv(t, `{"$set": {"n.m": 1}, "$push": {"arr": "x"}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"k": "z"}`), Update: jsv(t, `{"k": "zz", "r": 1}`)}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, Namespace{"db", "gone"}, bson.D{{Key: "x", Value: 1}})
	if _, err := s.Drop(Namespace{"db", "gone"}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, Namespace{"db2", "c"}, bson.D{{Key: "x", Value: 1}})
	if err := s.Rename(Namespace{"db2", "c"}, Namespace{"db2", "d"}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.CollMod(Namespace{"db2", "d"}, pre); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, Namespace{"db3", "c"}, bson.D{{Key: "x", Value: 1}})
	if err := s.DropDatabase("db3"); err != nil {
		t.Fatal(err)
	}
	want, rs, clock := state(t, s), s.ReplicaSetID(), s.ClusterTime()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir, nil)
	if got := state(t, s); got != want {
		t.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
	}
	if s.ReplicaSetID() != rs {
		t.Errorf("replica set id %v, want %v", s.ReplicaSetID(), rs)
	}
	if tsLess(s.ClusterTime(), clock) {
		t.Errorf("cluster time went back: %v < %v", s.ClusterTime(), clock)
	}
	// Unique indexes still hold after the restart.
	_, errs := s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "k", Value: "x"}})}, true)
	if len(errs) != 1 || errs[0].Err.Code != 11000 {
		t.Fatalf("unique index after restart: %v", errs)
	}

	// After a compaction, the snapshot alone restores the same state.
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
	want = state(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	gens, _ := journalGens(dir)
	if len(gens) != 1 {
		t.Fatalf("journals after compaction: %v", gens)
	}
	s = openDir(t, dir, nil)
	defer s.Close()
	if got := state(t, s); got != want {
		t.Fatalf("after compaction and restart:\n%s\nwant:\n%s", got, want)
	}
	if s.ReplicaSetID() != rs {
		t.Errorf("replica set id %v after compaction, want %v", s.ReplicaSetID(), rs)
	}
}

func TestPersistTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, nil)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 1}})
	want := state(t, s)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 2}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	gens, _ := journalGens(dir)
	path := journalPath(dir, gens[len(gens)-1])
	fi, _ := os.Stat(path)
	// Cut the last record in the middle, as a crash during write(2) would.
	if err := os.Truncate(path, fi.Size()-7); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s = openDir(t, dir, &logs)
	if got := state(t, s); got != want {
		t.Fatalf("after a torn tail:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(logs.String(), "torn record") {
		t.Errorf("no log line about the torn record: %q", logs.String())
	}
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 3}})
	want = state(t, s)
	s.Close()

	// A flipped byte is caught by the checksum the same way.
	fi, _ = os.Stat(path)
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff}, fi.Size()-3)
	f.Close()
	s = openDir(t, dir, nil)
	defer s.Close()
	if got := find(t, s, nsA, nil); len(got) != 1 || got[0].Lookup("_id").Int32() != 1 {
		t.Fatalf("after a corrupt tail: %v (state was %s)", got, want)
	}
}

func TestPersistOplogBound(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, OplogBytes: 20 * entryOverhead})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: i}})
	}
	oldest, _ := s.Oplog().Oldest()
	if err := s.compact(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(Config{Dir: dir, OplogBytes: 20 * entryOverhead})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Oplog().Oldest(); got != oldest {
		t.Errorf("oldest entry after restart %v, want %v", got, oldest)
	}
	if _, _, lost := s.Oplog().ReadAfter(bson.Timestamp{T: oldest.T, I: oldest.I - 2}, 0, 0); !lost {
		t.Error("reading from before the retained window after a restart is not reported lost")
	}
	if n, _ := s.Count(nsA, nil, 0, 0); n != 100 {
		t.Errorf("count %d after restart", n)
	}
}

func TestOpenBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(Config{Dir: file}); err == nil || !strings.Contains(err.Error(), "open store") {
		t.Fatalf("open on a file: %v", err)
	}
}
