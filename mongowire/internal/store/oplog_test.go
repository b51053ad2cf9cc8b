package store

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestOplogBound(t *testing.T) {
	o := newOplog(10*entryOverhead, 0)
	now := time.Now()
	for i := range 30 {
		o.append(now, OplogEntry{TS: bson.Timestamp{T: 100, I: uint32(i + 1)}, Wall: now, Op: "insert"})
	}
	n, bytes := o.stats()
	if n != 10 || bytes > 10*entryOverhead {
		t.Fatalf("retained %d entries, %d bytes; want 10 within %d", n, bytes, 10*entryOverhead)
	}
	oldest, ok := o.Oldest()
	if !ok || oldest != (bson.Timestamp{T: 100, I: 21}) {
		t.Fatalf("oldest %v %v", oldest, ok)
	}
	if o.Newest() != (bson.Timestamp{T: 100, I: 30}) {
		t.Fatalf("newest %v", o.Newest())
	}
	tests := map[string]struct {
		after   bson.Timestamp
		max     int
		maxB    int
		n       int
		scanned bson.Timestamp
		lost    bool
	}{
		"lost history":       {bson.Timestamp{T: 100, I: 5}, 0, 0, 10, bson.Timestamp{T: 100, I: 30}, true},
		"just before oldest": {bson.Timestamp{T: 100, I: 20}, 0, 0, 10, bson.Timestamp{T: 100, I: 30}, false},
		"limited by count":   {bson.Timestamp{T: 100, I: 20}, 3, 0, 3, bson.Timestamp{T: 100, I: 23}, false},
		"limited by bytes":   {bson.Timestamp{T: 100, I: 20}, 0, 2*entryOverhead + 1, 2, bson.Timestamp{T: 100, I: 22}, false},
		"at least one":       {bson.Timestamp{T: 100, I: 20}, 0, 1, 1, bson.Timestamp{T: 100, I: 21}, false},
		"caught up":          {bson.Timestamp{T: 100, I: 30}, 0, 0, 0, bson.Timestamp{T: 100, I: 30}, false},
		"in the future":      {bson.Timestamp{T: 200, I: 1}, 0, 0, 0, bson.Timestamp{T: 200, I: 1}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			es, scanned, lost := o.ReadAfter(tc.after, tc.max, tc.maxB)
			if len(es) != tc.n || scanned != tc.scanned || lost != tc.lost {
				t.Fatalf("got %d entries, scanned %v, lost %v; want %d, %v, %v", len(es), scanned, lost, tc.n, tc.scanned, tc.lost)
			}
			for i, e := range es {
				if !tsLess(tc.after, e.TS) || i > 0 && !tsLess(es[i-1].TS, e.TS) {
					t.Fatalf("entry %d at %v out of order after %v", i, e.TS, tc.after)
				}
			}
		})
	}
}

func TestOplogMinRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := newOplog(2*entryOverhead, time.Hour)
		start := time.Now()
		for i := range 5 {
			o.append(start, OplogEntry{TS: bson.Timestamp{T: 1, I: uint32(i + 1)}, Wall: start})
		}
		if n, _ := o.stats(); n != 5 {
			t.Fatalf("entries younger than the retention were dropped: %d left", n)
		}
		time.Sleep(2 * time.Hour)
		o.append(time.Now(), OplogEntry{TS: bson.Timestamp{T: 2, I: 1}, Wall: time.Now()})
		if n, _ := o.stats(); n != 2 {
			t.Fatalf("after the retention %d entries left, want 2", n)
		}
	})
}

func TestOplogChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openMem(t)
		ch := s.Oplog().Changed()
		woke := false
		go func() {
			<-ch
			woke = true
		}()
		synctest.Wait()
		if woke {
			t.Fatal("woken before any write")
		}
		mustInsert(t, s, nsA, bson.D{{Key: "x", Value: 1}})
		synctest.Wait()
		if !woke {
			t.Fatal("a write did not wake the waiter")
		}
		if s.Oplog().Changed() == ch {
			t.Fatal("Changed was not replaced")
		}
	})
}

// TestOplogRecordsDDL checks the entries of DDL commands and inserts, in
// order, with increasing cluster times.
func TestOplogRecordsDDL(t *testing.T) {
	s := openMem(t)
	start := s.Oplog().Newest()
	b := Namespace{"db", "b"}
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}})
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropIndexes(nsA, []string{"x_1"}); err != nil {
		t.Fatal(err)
	}
	pre := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	if err := s.CollMod(nsA, pre); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(nsA, b, true); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Delete(b, raw(t, bson.D{{Key: "_id", Value: 1}}), 1); err != nil || n != 1 {
		t.Fatalf("delete n=%d err=%v", n, err)
	}
	if err := s.DropDatabase("db"); err != nil {
		t.Fatal(err)
	}
	es, _, lost := s.Oplog().ReadAfter(start, 0, 0)
	if lost {
		t.Fatal("lost")
	}
	want := []struct {
		op, coll string
	}{
		{"create", "a"}, {"insert", "a"}, {"insert", "a"}, {"createIndexes", "a"}, {"dropIndexes", "a"},
		{"modify", "a"}, {"create", "b"}, {"rename", "a"}, {"delete", "b"}, {"drop", "b"}, {"dropDatabase", ""},
	}
	if len(es) != len(want) {
		for _, e := range es {
			t.Logf("%s %s", e.Op, e.NS)
		}
		t.Fatalf("got %d entries, want %d", len(es), len(want))
	}
	for i, w := range want {
		e := es[i]
		if e.Op != w.op || e.NS.Coll != w.coll || e.NS.DB != "db" {
			t.Errorf("entry %d: %s %s, want %s db.%s", i, e.Op, e.NS, w.op, w.coll)
		}
		if i > 0 && !tsLess(es[i-1].TS, e.TS) {
			t.Errorf("entry %d: cluster time %v not after %v", i, e.TS, es[i-1].TS)
		}
		if (e.Op == "dropDatabase") != (len(e.UUID.Data) == 0) {
			t.Errorf("entry %d %s: UUID %v", i, e.Op, e.UUID)
		}
		if e.Size == 0 || e.Wall.IsZero() {
			t.Errorf("entry %d: size %d wall %v", i, e.Size, e.Wall)
		}
	}
	if es[1].Doc.Lookup("_id").Int32() != 1 || es[1].DocKey.String() != `{"_id": {"$numberInt":"1"}}` {
		t.Errorf("insert entry doc %v key %v", es[1].Doc, es[1].DocKey)
	}
	if got := bson.Raw(raw(t, es[3].Extra)).Lookup("indexes", "0", "name").StringValue(); got != "x_1" {
		t.Errorf("createIndexes extra %v", es[3].Extra)
	}
	if got := bson.Raw(raw(t, es[7].Extra)); got.Lookup("to").StringValue() != "db.b" || got.Lookup("dropTarget").Type != bson.TypeBinary {
		t.Errorf("rename extra %v", got)
	}
	if got := bson.Raw(raw(t, es[0].Extra)); got.String() != `{"options": {}}` {
		t.Errorf("implicit create extra %v", got)
	}
	if got := bson.Raw(raw(t, es[5].Extra)); got.Lookup("changeStreamPreAndPostImages", "enabled").Boolean() != true ||
		got.Lookup("stateBeforeChange", "collectionOptions").String() != "{}" {
		t.Errorf("modify extra %v", got)
	}
	if es[8].Pre == nil || es[8].Pre.Lookup("_id").Int32() != 1 {
		t.Errorf("delete of a pre-image collection kept pre %v", es[8].Pre)
	}
	if ct := s.ClusterTime(); ct != es[len(es)-1].TS {
		t.Errorf("cluster time %v, newest entry %v", ct, es[len(es)-1].TS)
	}
	if now := s.Now(); !tsLess(es[len(es)-1].TS, now) {
		t.Errorf("Now %v not after the last write", now)
	}
}

// TestOplogResidentSize checks that the memory the oplog keeps stays within
// its bound plus 10%, for entries whose documents only the oplog holds.
func TestOplogResidentSize(t *testing.T) {
	const bound = 8 << 20
	tests := map[string]func(i int) OplogEntry{
		"inserts of 100-byte documents": func(i int) OplogEntry {
			doc := raw(t, bson.D{{Key: "_id", Value: i}, {Key: "s", Value: "0123456789012345678901234567890123456789012345678901234567890123456789012345"}})
			return OplogEntry{Op: "insert", NS: nsA, DocKey: docKey(doc), Doc: doc}
		},
		"updates with descriptions": func(i int) OplogEntry {
			before := raw(t, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: 1}, {Key: "b", Value: "x"}})
			after := raw(t, bson.D{{Key: "_id", Value: i}, {Key: "a", Value: 2}, {Key: "c", Value: "y"}})
			return OplogEntry{Op: "update", NS: nsA, DocKey: docKey(after), Doc: after, Update: diffDocs(before, after)}
		},
	}
	for name, gen := range tests {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			o := newOplog(bound, 0)
			now := time.Now()
			for i := range 200_000 {
				e := gen(i)
				e.TS, e.Wall = bson.Timestamp{T: 1, I: uint32(i + 1)}, now
				o.append(now, e)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			n, charged := o.stats()
			t.Logf("%d entries, charged %d KiB, heap %d KiB", n, charged>>10, used>>10)
			if used > bound*11/10 {
				t.Errorf("the oplog keeps %d KiB for a bound of %d KiB", used>>10, bound>>10)
			}
			runtime.KeepAlive(o)
		})
	}
}
