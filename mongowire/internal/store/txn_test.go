package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func testLSID(t testing.TB) bson.Raw {
	return raw(t, bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}})
}

func begin(t testing.TB, s *Store) *Txn {
	t.Helper()
	x, err := s.Begin(testLSID(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func ids(t testing.TB, docs []bson.Raw) []int32 {
	t.Helper()
	var out []int32
	for _, d := range docs {
		out = append(out, d.Lookup("_id").Int32())
	}
	return out
}

func txnFind(t testing.TB, x *Txn, ns Namespace) []int32 {
	t.Helper()
	docs, err := x.Find(ns, FindSpec{Sort: raw(t, bson.D{{Key: "_id", Value: 1}})})
	if err != nil {
		t.Fatal(err)
	}
	return ids(t, docs)
}

func sortedFind(t testing.TB, s *Store, ns Namespace) []int32 {
	t.Helper()
	docs, err := s.Find(ns, FindSpec{Sort: raw(t, bson.D{{Key: "_id", Value: 1}})})
	if err != nil {
		t.Fatal(err)
	}
	return ids(t, docs)
}

func same(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTxnIsolation: a transaction sees its own writes and not later
// commits; others see none of its writes until commit, then all.
func TestTxnIsolation(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}})
	x := begin(t, s)
	if n, errs := x.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: int32(3)}})}, true); n != 1 || errs != nil {
		t.Fatalf("insert in txn: %d %v", n, errs)
	}
	if n, err := x.Delete(nsA, raw(t, bson.D{{Key: "_id", Value: int32(1)}}), 1); n != 1 || err != nil {
		t.Fatalf("delete in txn: %d %v", n, err)
	}
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(4)}}) // committed after the snapshot
	if got := txnFind(t, x, nsA); !same(got, []int32{2, 3}) {
		t.Fatalf("txn sees %v, want [2 3]", got)
	}
	if got := sortedFind(t, s, nsA); !same(got, []int32{1, 2, 4}) {
		t.Fatalf("outside sees %v, want [1 2 4]", got)
	}
	if n, _ := s.Count(nsA, nil, 0, 0); n != 3 {
		t.Fatalf("outside count %d, want 3", n)
	}
	if n, _ := x.Count(nsA, nil, 0, 0); n != 2 {
		t.Fatalf("txn count %d, want 2", n)
	}
	before := s.Oplog().Newest()
	ts, err := x.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedFind(t, s, nsA); !same(got, []int32{2, 3, 4}) {
		t.Fatalf("after commit %v, want [2 3 4]", got)
	}
	es, _, _ := s.Oplog().ReadAfter(before, 0, 0)
	if len(es) != 2 {
		t.Fatalf("%d oplog entries, want 2", len(es))
	}
	for i, e := range es {
		if e.TS != ts || e.Txn == nil || e.Txn.OpIndex != i || e.Txn.Number != 1 || e.Txn.Last != (i == 1) {
			t.Fatalf("entry %d: ts %v (commit %v) txn %+v", i, e.TS, ts, e.Txn)
		}
	}
	if _, err := x.Commit(); err != nil {
		t.Fatalf("commit again: %v", err)
	}
	if _, err := x.Find(nsA, FindSpec{}); err != nil {
		t.Fatal(err)
	}
	if n := s.OpenTransactions(); n != 0 {
		t.Fatalf("%d open transactions", n)
	}
}

// TestTxnAbort: abort takes back inserts, updates, deletes and the
// collection the transaction created.
func TestTxnAbort(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(1)}, {Key: "v", Value: 1}}, bson.D{{Key: "_id", Value: int32(2)}})
	x := begin(t, s)
	x.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: int32(3)}})}, true)
	if _, err := x.Update(nsA, UpdateSpec{Filter: raw(t, bson.D{{Key: "_id", Value: int32(1)}}), Update: rv(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 2}}}})}); err != nil {
		t.Fatal(err)
	}
	x.Delete(nsA, raw(t, bson.D{{Key: "_id", Value: int32(2)}}), 1)
	nsB := Namespace{DB: "db", Coll: "b"}
	x.Insert(nsB, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: int32(9)}})}, true)
	x.Abort()
	if got := sortedFind(t, s, nsA); !same(got, []int32{1, 2}) {
		t.Fatalf("after abort %v, want [1 2]", got)
	}
	if d := find(t, s, nsA, bson.D{{Key: "v", Value: 1}}); len(d) != 1 {
		t.Fatalf("update not taken back: %v", d)
	}
	if _, ok := s.Collection(nsB); ok {
		t.Fatal("the collection the transaction created is still there")
	}
	wantCode(t, x.Err(), mongoerr.NoSuchTransaction)
	if _, err := x.Find(nsA, FindSpec{}); err != nil {
		t.Fatal(err)
	}
	_, errs := x.Insert(nsA, []bson.Raw{raw(t, bson.D{})}, true)
	if len(errs) != 1 {
		t.Fatalf("insert after abort: %v", errs)
	}
	wantCode(t, errs[0].Err, mongoerr.NoSuchTransaction)
}

// TestTxnWriteConflict: first writer wins, between transactions and
// against a commit after the snapshot; the loser is aborted.
func TestTxnWriteConflict(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}})
	set := rv(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})
	one := raw(t, bson.D{{Key: "_id", Value: int32(1)}})
	a, b := begin(t, s), begin(t, s)
	if _, err := a.Update(nsA, UpdateSpec{Filter: one, Update: set}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Update(nsA, UpdateSpec{Filter: one, Update: set})
	if e := wantCode(t, err, mongoerr.WriteConflict); !e.HasLabel(mongoerr.LabelTransient) {
		t.Fatalf("no TransientTransactionError label: %v", e.Labels)
	}
	wantCode(t, b.Err(), mongoerr.NoSuchTransaction)
	if _, err := a.Commit(); err != nil {
		t.Fatal(err)
	}

	c := begin(t, s)
	if _, err := s.Update(nsA, UpdateSpec{Filter: raw(t, bson.D{{Key: "_id", Value: int32(2)}}), Update: set}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Delete(nsA, raw(t, bson.D{{Key: "_id", Value: int32(2)}}), 1)
	wantCode(t, err, mongoerr.WriteConflict)
}

// TestTxnBlocksPlainWrite: a write outside the transaction to a document
// it wrote waits for it to end, then runs on the committed version.
func TestTxnBlocksPlainWrite(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(1)}, {Key: "n", Value: int32(0)}})
	inc := rv(t, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}})
	one := raw(t, bson.D{{Key: "_id", Value: int32(1)}})
	x := begin(t, s)
	if _, err := x.Update(nsA, UpdateSpec{Filter: one, Update: inc}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(nsA, UpdateSpec{Filter: one, Update: inc})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the plain write did not wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := find(t, s, nsA, nil); d[0].Lookup("n").Int32() != 2 {
		t.Fatalf("n = %v, want 2", d[0].Lookup("n"))
	}
}

// TestTxnJournaledWhole: a transaction cut short in the journal by a
// crash is dropped whole at restart; a whole one is replayed.
func TestTxnJournaledWhole(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, nil)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: int32(1)}})
	x := begin(t, s)
	for i := int32(2); i <= 4; i++ {
		x.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: i}})}, true)
	}
	if _, err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := journalPath(dir, 1)
	st, err := os.Stat(path)
	if err != nil {
		matches, _ := filepath.Glob(filepath.Join(dir, "*"))
		t.Fatalf("%v (files %v)", err, matches)
	}
	s = openDir(t, dir, nil)
	if got := sortedFind(t, s, nsA); !same(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("after restart %v, want [1 2 3 4]", got)
	}
	s.Close()
	// Cut the last entry of the transaction off, as a crash in its write could.
	if err := os.Truncate(path, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir, nil)
	defer s.Close()
	if got := sortedFind(t, s, nsA); !same(got, []int32{1}) {
		t.Fatalf("after a torn transaction %v, want [1]", got)
	}
}
