package store

import (
	"fmt"
	"testing"

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
