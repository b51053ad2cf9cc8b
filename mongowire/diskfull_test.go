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
// space is freed, until it is restarted, and answers nothing but the
// handshake meanwhile. After a restart every acknowledged insert is there,
// in order, and the failed one is absent; writes are accepted again.
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
	// The failed journal write is answered with mongod's OutOfDiskSpace,
	// naming the cause.
	nospace := syscall.ENOSPC.Error()
	wantFull := func(what string, err error) {
		t.Helper()
		var ce mongo.CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %T %v, want a command error", what, err, err)
		}
		if ce.Code != 14031 || ce.Name != "OutOfDiskSpace" || !strings.Contains(ce.Message, nospace) {
			t.Fatalf("%s: code %d %s %q, want 14031 OutOfDiskSpace naming %q", what, ce.Code, ce.Name, ce.Message, nospace)
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

	// Nothing is answered from the store until a restart: its memory
	// holds the failed insert, which the journal does not. The handshake
	// still works, so that drivers see a live server with a clear error.
	if _, err := coll.Find(t.Context(), bson.D{}); err == nil {
		t.Fatal("a read after the journal failed was answered from memory the journal does not hold")
	} else {
		wantFull("a read after the failure", err)
	}
	if err := c.Database("admin").RunCommand(t.Context(), bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Fatalf("ping after the journal failed: %v", err)
	}

	c.Disconnect(context.Background())
	if err := s.Close(); err != nil {
		t.Fatalf("close with the disk no longer full: %v", err)
	}

	s, c = startOn(t, dir, disk)
	defer s.Close()
	defer c.Disconnect(context.Background())
	coll = c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.Majority()))
	got := findAll(t, coll)
	tail := checkAcked(t, got, acked, doc)
	if len(tail) != 0 {
		t.Fatalf("after the restart, after the acknowledged inserts: %v; want nothing: the failed write was cut from the journal", tail)
	}

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

// TestDiskFullFailsWholeWrite: an unacknowledged (w: 1) insertMany whose
// journal write runs out of space is reported as failed, with no count of
// documents "inserted" in memory, and a restart finds none of it.
func TestDiskFullFailsWholeWrite(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.NewDisk()
	s, c := startOn(t, dir, disk)
	coll := c.Database("db").Collection("c", options.Collection().SetWriteConcern(writeconcern.W1()))
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	disk.Fill(300) // less than the three documents' journal records
	pad := strings.Repeat("p", 200)
	res, err := coll.InsertMany(t.Context(), []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "pad", Value: pad}},
		bson.D{{Key: "_id", Value: 2}, {Key: "pad", Value: pad}},
		bson.D{{Key: "_id", Value: 3}, {Key: "pad", Value: pad}},
	})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 14031 {
		t.Fatalf("insertMany on a full disk: %v (result %+v), want command error 14031 OutOfDiskSpace", err, res)
	}
	c.Disconnect(context.Background())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	disk.Fill(-1)
	s, c = startOn(t, dir, disk)
	defer s.Close()
	defer c.Disconnect(context.Background())
	got := findAll(t, c.Database("db").Collection("c"))
	if len(got) != 1 {
		t.Fatalf("after the restart the collection holds %d documents, want only the one acknowledged before: the failed write must leave nothing", len(got))
	}
}
