package store

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// TestCompactionOnFullDisk: a compaction that cannot create the next
// journal on a full disk fails without leaving a torn journal behind, so
// the next compaction, with space freed, succeeds; writes go on meanwhile.
func TestCompactionOnFullDisk(t *testing.T) {
	disk := faultfs.NewDisk()
	s, err := Open(Config{Dir: t.TempDir(), FS: disk, NoopInterval: -1, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ns := Namespace{DB: "db", Coll: "c"}
	insert := func(id int) {
		t.Helper()
		doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(id)}})
		if _, errs := s.Insert(ns, []bson.Raw{doc}, true); len(errs) > 0 {
			t.Fatalf("insert %d: %v", id, errs[0].Err)
		}
	}
	insert(1)
	disk.Fill(0)
	if err := s.compact(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("compaction on a full disk: %v, want ENOSPC", err)
	}
	disk.Fill(-1)
	insert(2) // the old journal still takes writes
	if err := s.compact(); err != nil {
		t.Fatalf("compaction after space was freed: %v", err)
	}
	insert(3)
}

// TestTransactionCommitOnFullDisk: a commit whose journal write finds the
// disk full fails with OutOfDiskSpace and keeps none of the transaction:
// not in memory, and not after a restart with space freed; what was
// committed before stays.
func TestTransactionCommitOnFullDisk(t *testing.T) {
	for _, room := range []int64{0, 10, 60} { // none, and part of the commit's record
		t.Run(fmt.Sprint(room), func(t *testing.T) { transactionOnFullDisk(t, room) })
	}
}

func transactionOnFullDisk(t *testing.T, room int64) {
	disk := faultfs.NewDisk()
	dir := t.TempDir()
	open := func() *Store {
		t.Helper()
		s, err := Open(Config{Dir: dir, FS: disk, NoopInterval: -1, SyncInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	ns := Namespace{DB: "db", Coll: "c"}
	doc := func(id int32) bson.Raw { d, _ := bson.Marshal(bson.D{{Key: "_id", Value: id}}); return d }
	if _, errs := s.Insert(ns, []bson.Raw{doc(1)}, true); errs != nil {
		t.Fatal(errs)
	}
	x := begin(t, s)
	if _, errs := x.Insert(ns, []bson.Raw{doc(2), doc(3)}, true); errs != nil {
		t.Fatal(errs)
	}
	disk.Fill(room)
	_, err := x.Commit()
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != mongoerr.OutOfDiskSpace {
		t.Fatalf("commit on a full disk: %v, want OutOfDiskSpace", err)
	}
	if got := sortedFind(t, s, ns); !same(got, []int32{1}) {
		t.Fatalf("after the failed commit the store holds %v, want [1]", got)
	}
	s.Close()
	disk.Fill(-1)
	s = open()
	defer s.Close()
	if got := sortedFind(t, s, ns); !same(got, []int32{1}) {
		t.Fatalf("after a restart the store holds %v, want [1]", got)
	}
}
