package mongowire_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/tide-cdc/tide/internal/faultfs"
)

// TestDiskFullLosesNoAcknowledgedWrite fills the disk under the journal
// while a client inserts with w: majority, so that each acknowledgement
// means the insert was fsynced. The insert whose journal write runs out of
// space fails with the cause; the store then refuses writes, even once
// space is freed, until it is restarted, and reads go on. After a restart
// every acknowledged insert is there, in order, and the failed one is
// absent or whole, never torn; writes are accepted again.
//
// The disk filling during a compaction is not covered here: a compaction
// starts only past a 64 MiB journal, which this package cannot lower.
func TestDiskFullLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.NewDisk()
	s, c := startOn(t, dir, disk)
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	doc := func(i int) bson.D {
		return bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: strings.Repeat("p", 100)}}
	}

	var acked []int
	for i := range 10 { // with room to spare: the collection is created
		if _, err := coll.InsertOne(t.Context(), doc(i)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, i)
	}
	disk.Fill(1000) // room for a few more journal records of ~200 bytes
	failed, failure := -1, error(nil)
	for i := len(acked); i < 100; i++ {
		if _, err := coll.InsertOne(t.Context(), doc(i)); err != nil {
			failed, failure = i, err
			break
		}
		acked = append(acked, i)
	}
	switch {
	case failed < 0:
		t.Fatal("100 inserts acknowledged on a disk with room for 1000 bytes")
	case failed == 10:
		t.Fatal("the first insert after Fill failed: the test no longer fills the disk mid-way")
	}
	// The write concern's wait for the fsync finds the store broken and
	// answers with a command error naming the cause.
	nospace := syscall.ENOSPC.Error()
	wantFull := func(what string, err error) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %T %v, want a command error", what, err, err)
		}
		if ce.Code != 1 || ce.Name != "InternalError" || !strings.Contains(ce.Message, nospace) {
			t.Fatalf("%s: code %d %s %q, want 1 InternalError naming %q", what, ce.Code, ce.Name, ce.Message, nospace)
		}
	}
	wantFull("the insert that filled the disk", failure)
	t.Logf("insert %d on a full disk: %v", failed, failure)

	// The store refuses writes after a failed journal write, even with
	// space free again: its journal may end in a torn record, which only
	// a restart cuts off.
	if _, err := coll.InsertOne(t.Context(), doc(failed+1)); err == nil {
		t.Fatal("an insert after the journal failed was acknowledged")
	} else {
		wantFull("an insert after the failure", err)
	}
	disk.Fill(-1)
	if _, err := coll.InsertOne(t.Context(), doc(failed+1)); err == nil {
		t.Fatal("an insert after the journal failed, with space freed, was acknowledged before a restart")
	} else {
		wantFull("an insert after space was freed", err)
	}

	// Reads go on. The failed insert was applied in memory before its
	// journal write failed, and is not rolled back: a read may see it
	// until the restart.
	got := findAll(t, coll)
	tail := checkAcked(t, got, acked, doc)
	if len(tail) > 1 || len(tail) == 1 && !sameDoc(tail[0], doc(failed)) {
		t.Fatalf("a read on the full disk, after the acknowledged inserts: %v; want nothing or insert %d", tail, failed)
	}
	t.Logf("a read on the full disk: %d acknowledged inserts and %d of the failed one", len(acked), len(tail))

	c.Disconnect(context.Background())
	if err := s.Close(); err != nil {
		t.Fatalf("close with the disk no longer full: %v", err)
	}

	s, c = startOn(t, dir, disk)
	defer s.Close()
	defer c.Disconnect(context.Background())
	coll = c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	got = findAll(t, coll)
	tail = checkAcked(t, got, acked, doc)
	if len(tail) > 1 || len(tail) == 1 && !sameDoc(tail[0], doc(failed)) {
		t.Fatalf("after the restart, after the acknowledged inserts: %v; want nothing or insert %d whole", tail, failed)
	}
	t.Logf("after the restart: %d acknowledged inserts and %d of the failed one", len(acked), len(tail))

	next := failed + 1
	if _, err := coll.InsertOne(t.Context(), doc(next)); err != nil {
		t.Fatalf("an insert after the restart with space free: %v", err)
	}
	if got := findAll(t, coll); !sameDoc(got[len(got)-1], doc(next)) {
		t.Fatalf("the last document after an insert following the restart is %v, want insert %d", got[len(got)-1], next)
	}
}

// findAll returns the documents of coll in natural (insertion) order.
func findAll(t *testing.T, coll *mongo.Collection) []bson.Raw {
	t.Helper()
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var out []bson.Raw
	for cur.Next(t.Context()) {
		out = append(out, slices.Clone(cur.Current)) // Current is reused by Next
	}
	if err := cur.Err(); err != nil {
		t.Fatalf("find: %v", err)
	}
	return out
}

// checkAcked requires got to start with the acknowledged inserts, whole
// and in order, and returns the documents after them.
func checkAcked(t *testing.T, got []bson.Raw, acked []int, doc func(int) bson.D) []bson.Raw {
	t.Helper()
	if len(got) < len(acked) {
		t.Fatalf("%d documents, want at least the %d acknowledged", len(got), len(acked))
	}
	for k, i := range acked {
		if !sameDoc(got[k], doc(i)) {
			t.Fatalf("document %d is %v, want acknowledged insert %d", k, got[k], i)
		}
	}
	return got[len(acked):]
}

func sameDoc(got bson.Raw, want bson.D) bool {
	w, err := bson.Marshal(want)
	return err == nil && string(got) == string(w)
}
