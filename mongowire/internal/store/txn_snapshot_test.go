package store

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Snapshot reads and transactions: a read at a cluster time never sees a
// transaction's writes while it is open or after it aborted, sees them
// only at or after the commit's cluster time, and the snapshot history
// holds nothing of an aborted transaction.
func TestSnapshotReadsAndTransactions(t *testing.T) {
	s := openMem(t)
	ns := Namespace{DB: "d", Coll: "c"}
	state := func(ts bson.Timestamp) string {
		t.Helper()
		docs, err := s.FindAt(ns, FindSpec{}, ts)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, d := range docs {
			out += fmt.Sprint(d.Lookup("_id").Int32(), ":", d.Lookup("v").Int32(), " ")
		}
		return out
	}
	doc := func(id, v int32) bson.Raw { return raw(t, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: v}}) }
	s.Insert(ns, []bson.Raw{doc(1, 0), doc(2, 0)}, true)
	t0 := s.ClusterTime()
	const base = "1:0 2:0 "

	// Open: insert 3, update 1, delete 2.
	x := begin(t, s)
	if _, errs := x.Insert(ns, []bson.Raw{doc(3, 0)}, true); errs != nil {
		t.Fatal(errs)
	}
	if _, err := x.Update(ns, UpdateSpec{Filter: raw(t, bson.D{{Key: "_id", Value: 1}}), Update: rv(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 9}}}})}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Delete(ns, raw(t, bson.D{{Key: "_id", Value: 2}}), 1); err != nil {
		t.Fatal(err)
	}
	if got := state(t0); got != base {
		t.Fatalf("snapshot at t0 with a transaction open = %q, want %q", got, base)
	}
	if got := state(s.ClusterTime()); got != base {
		t.Fatalf("snapshot now with a transaction open = %q, want %q", got, base)
	}
	kept := len(s.hist.kept())
	x.Abort()
	if n := len(s.hist.kept()); n != kept {
		t.Fatalf("abort left %d versions in the snapshot history (before: %d)", n, kept)
	}
	if got := state(s.ClusterTime()); got != base {
		t.Fatalf("snapshot after abort = %q, want %q", got, base)
	}

	// Committed: invisible before the commit's cluster time, visible at it.
	x = begin(t, s)
	x.Insert(ns, []bson.Raw{doc(3, 0)}, true)
	x.Update(ns, UpdateSpec{Filter: raw(t, bson.D{{Key: "_id", Value: 1}}), Update: rv(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 9}}}})})
	x.Delete(ns, raw(t, bson.D{{Key: "_id", Value: 2}}), 1)
	s.Insert(Namespace{DB: "d", Coll: "other"}, []bson.Raw{doc(1, 0)}, true) // a cluster time between the statements and the commit
	mid := s.ClusterTime()
	ts, err := x.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if got := state(mid); got != base {
		t.Fatalf("snapshot between the statements and the commit = %q, want %q", got, base)
	}
	if got, want := state(ts), "1:9 3:0 "; got != want {
		t.Fatalf("snapshot at the commit = %q, want %q", got, want)
	}
}

// mongod refuses a transaction's writes to a capped collection.
func TestTransactionRefusesCappedWrites(t *testing.T) {
	s := openMem(t)
	ns := Namespace{DB: "d", Coll: "capped"}
	if err := s.Create(ns, bson.D{{Key: "capped", Value: true}, {Key: "size", Value: int64(4096)}}); err != nil {
		t.Fatal(err)
	}
	x := begin(t, s)
	_, errs := x.Insert(ns, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 1}})}, true)
	if len(errs) != 1 || errs[0].Err.Code != mongoerr.OperationNotSupportedInTransaction {
		t.Fatalf("insert into a capped collection in a transaction: %v, want OperationNotSupportedInTransaction", errs)
	}
	if n := sortedFind(t, s, ns); len(n) != 0 {
		t.Fatalf("capped collection holds %v after the refused insert", n)
	}
}

// A key an open transaction holds (its uncommitted insert) is no duplicate
// yet: another transaction inserting it conflicts, a plain insert waits
// for the transaction and then fails or succeeds by its outcome.
func TestTxnHeldKey(t *testing.T) {
	s := openMem(t)
	doc := raw(t, bson.D{{Key: "_id", Value: int32(1)}})
	x := begin(t, s)
	if _, errs := x.Insert(nsA, []bson.Raw{doc}, true); errs != nil {
		t.Fatal(errs)
	}
	y, err := s.Begin(testLSID(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := y.Insert(nsA, []bson.Raw{doc}, true); len(errs) != 1 || errs[0].Err.Code != mongoerr.WriteConflict {
		t.Fatalf("second transaction inserting a held key: %v, want WriteConflict", errs)
	}
	plain := func() chan []WriteError {
		done := make(chan []WriteError, 1)
		go func() {
			_, errs := s.Insert(nsA, []bson.Raw{doc}, true)
			done <- errs
		}()
		select {
		case errs := <-done:
			t.Fatalf("a plain insert of a held key did not wait: %v", errs)
		case <-time.After(50 * time.Millisecond):
		}
		return done
	}
	done := plain()
	x.Abort()
	if errs := <-done; errs != nil {
		t.Fatalf("plain insert after the holder aborted: %v", errs)
	}
	if got := sortedFind(t, s, nsA); len(got) != 1 {
		t.Fatalf("documents after the abort and the plain insert: %v", got)
	}

	// A commit makes it a duplicate.
	two := raw(t, bson.D{{Key: "_id", Value: int32(2)}})
	x, _ = s.Begin(testLSID(t), 3)
	x.Insert(nsA, []bson.Raw{two}, true)
	done = make(chan []WriteError, 1)
	go func() {
		_, errs := s.Insert(nsA, []bson.Raw{two}, true)
		done <- errs
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	if errs := <-done; len(errs) != 1 || errs[0].Err.Code != mongoerr.DuplicateKey {
		t.Fatalf("plain insert after the holder committed: %v, want DuplicateKey", errs)
	}
}

// A secondary unique key an open transaction freed (by deleting the
// document that held it) is not free for others until it commits: a plain
// insert taking it waits, and after an abort fails as a duplicate; after
// a commit it succeeds.
func TestTxnFreedSecondaryKey(t *testing.T) {
	s := openMem(t)
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Name: "email_1", Key: bson.D{{Key: "email", Value: 1}}, Unique: true}}); err != nil {
		t.Fatal(err)
	}
	holder := raw(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "email", Value: "a"}})
	taker := raw(t, bson.D{{Key: "_id", Value: int32(2)}, {Key: "email", Value: "a"}})
	if _, errs := s.Insert(nsA, []bson.Raw{holder}, true); errs != nil {
		t.Fatal(errs)
	}
	for _, commit := range []bool{false, true} {
		x, err := s.Begin(testLSID(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := x.Delete(nsA, raw(t, bson.D{{Key: "_id", Value: int32(1)}}), 1); err != nil || n != 1 {
			t.Fatalf("delete in the transaction: %d %v", n, err)
		}
		done := make(chan []WriteError, 1)
		go func() {
			_, errs := s.Insert(nsA, []bson.Raw{taker}, true)
			done <- errs
		}()
		select {
		case errs := <-done:
			t.Fatalf("a plain insert took a key an open transaction freed: %v", errs)
		case <-time.After(50 * time.Millisecond):
		}
		if commit {
			if _, err := x.Commit(); err != nil {
				t.Fatal(err)
			}
			if errs := <-done; errs != nil {
				t.Fatalf("insert after the commit freed the key: %v", errs)
			}
		} else {
			x.Abort()
			if errs := <-done; len(errs) != 1 || errs[0].Err.Code != mongoerr.DuplicateKey {
				t.Fatalf("insert after the abort restored the key: %v, want DuplicateKey", errs)
			}
		}
	}
	if got := sortedFind(t, s, nsA); len(got) != 1 || got[0] != 2 {
		t.Fatalf("documents at the end: %v, want [2]", got)
	}
}
