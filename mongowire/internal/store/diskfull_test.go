package store

import (
	"errors"
	"syscall"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
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
