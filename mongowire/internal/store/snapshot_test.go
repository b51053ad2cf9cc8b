package store

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Reads at a cluster time see the collection as it was then: later
// inserts, updates and deletes (of records compacted away too) undone, in
// natural order.
func TestReadAt(t *testing.T) {
	s := openMem(t)
	ns := Namespace{DB: "d", Coll: "c"}
	at := func() bson.Timestamp { return s.ClusterTime() }
	ids := func(ts bson.Timestamp) string {
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
	var docs []bson.Raw
	for i := range 3 {
		docs = append(docs, raw(t, bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: int32(0)}}))
	}
	s.Insert(ns, docs, true)
	t0 := at()
	if _, err := s.Update(ns, UpdateSpec{Filter: raw(t, bson.D{{Key: "_id", Value: 1}}), Update: rv(t, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}})}); err != nil {
		t.Fatal(err)
	}
	t1 := at()
	if _, err := s.Delete(ns, raw(t, bson.D{{Key: "_id", Value: 0}}), 1); err != nil {
		t.Fatal(err)
	}
	s.Insert(ns, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: int32(9)}, {Key: "v", Value: int32(9)}})}, true)
	t2 := at()
	// Enough deletes to compact the records away.
	var more []bson.Raw
	for i := 100; i < 3200; i++ {
		more = append(more, raw(t, bson.D{{Key: "_id", Value: int32(i)}, {Key: "v", Value: int32(0)}}))
	}
	s.Insert(ns, more, true)
	t3 := at()
	if _, err := s.Delete(ns, raw(t, bson.D{}), 0); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		ts   bson.Timestamp
		want string
	}{
		"before the update": {t0, "0:0 1:0 2:0 "},
		"after the update":  {t1, "0:0 1:1 2:0 "},
		"after the delete":  {t2, "1:1 2:0 9:9 "},
		"now":               {at(), ""},
	} {
		if got := ids(c.ts); got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
	if docs, err := s.FindAt(ns, FindSpec{Filter: raw(t, bson.D{{Key: "v", Value: 0}}), Sort: raw(t, bson.D{{Key: "_id", Value: -1}}), Limit: 2}, t3); err != nil || len(docs) != 2 || docs[0].Lookup("_id").Int32() != 3199 {
		t.Errorf("sorted find at t3 = %v, %v", docs, err)
	}
	vals, err := s.DistinctAt(ns, "v", nil, t2)
	if err != nil || len(vals) != 3 {
		t.Errorf("distinct at t2 = %v, %v", vals, err)
	}
	out, err := s.AggregateAt(ns, []bson.Raw{raw(t, bson.D{{Key: "$count", Value: "n"}})}, t3, mql.Limits{})
	if err != nil || len(out) != 1 || out[0].Lookup("n").Int32() != 3103 {
		t.Errorf("aggregate at t3 = %v, %v", out, err)
	}
}

// A read older than the history, or across a drop of its collection, is
// refused with mongod's codes.
func TestReadAtRefusals(t *testing.T) {
	s := openMem(t)
	ns := Namespace{DB: "d", Coll: "c"}
	before := s.ClusterTime()
	before.T-- // a time before the store opened
	s.Insert(ns, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 1}})}, true)
	_, err := s.FindAt(ns, FindSpec{}, before)
	if e := wantCode(t, err, mongoerr.SnapshotTooOld); e.Message != fmt.Sprintf("Read timestamp Timestamp(%d, %d) is older than the oldest available timestamp.", before.T, before.I) {
		t.Errorf("message %q", e.Message)
	}
	t0 := s.ClusterTime()
	if _, err := s.Drop(ns); err != nil {
		t.Fatal(err)
	}
	_, err = s.FindAt(ns, FindSpec{}, t0)
	wantCode(t, err, mongoerr.SnapshotUnavailable)
	// Another collection is unaffected.
	if _, err := s.FindAt(Namespace{DB: "d", Coll: "other"}, FindSpec{}, t0); err != nil {
		t.Fatal(err)
	}
}

// The history forgets what is past its window, and the floor follows.
func TestHistoryWindow(t *testing.T) {
	var h history
	start := time.Now()
	h.add(version{ts: bson.Timestamp{T: 1}, wall: start.UnixNano(), rid: 1, pre: bson.Raw("xxxxx")})
	h.add(version{ts: bson.Timestamp{T: 2}, wall: start.Add(time.Second).UnixNano(), rid: 1})
	if h.floor != (bson.Timestamp{}) || len(h.kept()) != 2 {
		t.Fatalf("within the window: floor %v, %d versions", h.floor, len(h.kept()))
	}
	h.add(version{ts: bson.Timestamp{T: 400}, wall: start.Add(snapshotHistoryWindow + 2*time.Second).UnixNano(), rid: 1})
	if h.floor != (bson.Timestamp{T: 2}) || len(h.kept()) != 1 || h.bytes != versionSize {
		t.Fatalf("past the window: floor %v, %d versions, %d bytes", h.floor, len(h.kept()), h.bytes)
	}
	// The byte bound: the oldest go first, and the front is reclaimed.
	for i := range snapshotHistoryBytes/versionSize + 2000 {
		h.add(version{ts: bson.Timestamp{T: 500, I: uint32(i)}, wall: start.Add(snapshotHistoryWindow + 3*time.Second).UnixNano(), rid: 1})
	}
	if h.bytes > snapshotHistoryBytes || h.floor.T != 500 || len(h.versions) > 2*len(h.kept())+1024 {
		t.Fatalf("past the byte bound: %d bytes, floor %v, %d slots for %d versions", h.bytes, h.floor, len(h.versions), len(h.kept()))
	}
}

// TestHistoryReleasesDroppedCollection: a dropped collection's versions
// (which could never be read again) are forgotten at the drop, so the
// history does not keep its documents alive; another collection's stay.
func TestHistoryReleasesDroppedCollection(t *testing.T) {
	s := openMem(t)
	gone, kept := Namespace{DB: "d", Coll: "gone"}, Namespace{DB: "d", Coll: "kept"}
	for i := range 50 {
		for _, ns := range []Namespace{gone, kept} {
			if _, errs := s.Insert(ns, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: i}})}, true); len(errs) > 0 {
				t.Fatal(errs[0].Err)
			}
		}
	}
	if _, err := s.Delete(gone, raw(t, bson.D{}), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drop(gone); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ofKept int
	for _, v := range s.hist.kept() {
		switch {
		case v.c == nil:
		case v.c.info.Name == gone.Coll:
			t.Fatalf("a version of the dropped collection is still kept (record %d)", v.rid)
		case v.c.info.Name == kept.Coll:
			ofKept++
		}
	}
	if ofKept != 50 {
		t.Errorf("%d versions of the other collection kept, want its 50 inserts", ofKept)
	}
	want := 0
	for _, v := range s.hist.kept() {
		want += len(v.pre) + versionSize
	}
	if s.hist.bytes != want {
		t.Errorf("history counts %d bytes, its versions hold %d", s.hist.bytes, want)
	}
}
