package store

import (
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestNoopAdvancesIdleClock: with no writes, the newest scanned time moves
// on every interval and wakes waiters, as MongoDB's periodic no-op writer
// makes an idle change stream's resume token advance. Writes hold it back.
func TestNoopAdvancesIdleClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(Config{NoopInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := s.Oplog().Newest()
		changed := s.Oplog().Changed()

		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		first := s.Oplog().Newest()
		if !tsLess(start, first) {
			t.Fatalf("idle for an interval: newest %v, want after %v", first, start)
		}
		select {
		case <-changed:
		default:
			t.Fatal("the no-op did not wake waiters")
		}
		if ct := s.ClusterTime(); tsLess(ct, first) {
			t.Fatalf("cluster time %v is behind the scanned time %v", ct, first)
		}

		// A write within the interval means no no-op is needed.
		time.Sleep(5 * time.Second)
		if _, errs := s.Insert(Namespace{"db", "c"}, []bson.Raw{mustRaw(t, bson.D{{Key: "_id", Value: 1}})}, true); len(errs) > 0 {
			t.Fatal(errs[0].Err)
		}
		written := s.Oplog().Newest()
		time.Sleep(5*time.Second + time.Millisecond)
		synctest.Wait()
		if got := s.Oplog().Newest(); got != written {
			t.Fatalf("a no-op followed a write only 5 s old: newest %v, want %v", got, written)
		}
		entries, scanned, _ := s.Oplog().ReadAfter(start, 0, 0)
		if len(entries) != 2 || scanned != written { // create + insert
			t.Fatalf("ReadAfter = %d entries up to %v; want the create and the insert, up to %v", len(entries), scanned, written)
		}
	})
}

func TestNoopDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(Config{NoopInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := s.Oplog().Newest()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := s.Oplog().Newest(); got != start {
			t.Fatalf("no-ops disabled, yet newest moved from %v to %v", start, got)
		}
	})
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
