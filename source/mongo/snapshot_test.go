package mongo

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// The snapshot copies existing documents in _id order, then the stream
// delivers, after them, every change from the token taken before the copy.
func TestSnapshotThenStream(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 50; i++ {
		insert(t, e.coll, i)
	}
	cfg := e.config(t)
	cfg.Snapshot = "initial"
	cfg.SnapshotBatch = 7
	var bar bytes.Buffer
	cfg.Progress = &bar
	src := openSource(t, cfg, nil)
	insert(t, e.coll, 51, 52)
	if _, err := e.coll.UpdateOne(context.Background(), bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}

	got, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		n := 0
		for _, ev := range evs {
			if ev.Op != cdc.OpSnapshot && ev.Op != cdc.OpMarker {
				n++
			}
		}
		return n >= 3
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Op != cdc.OpMarker || !bytes.HasPrefix(got[0].Pos, []byte(`{"snapshot":{"start_token":`)) {
		t.Fatalf("first event %s %s, want a snapshot marker", got[0].Op, got[0].Pos)
	}
	var snap []int
	i := 1
	for ; i < len(got) && got[i].Op == cdc.OpSnapshot; i++ {
		ev := got[i]
		snap = append(snap, docID(t, ev))
		if ev.FullDocument == nil || ev.Namespace != "shop.orders" {
			t.Errorf("snapshot event %d: full document %v, namespace %q", i, ev.FullDocument, ev.Namespace)
		}
		if want := fmt.Sprintf(`"last_id":{"$numberInt":"%d"}}}`, docID(t, ev)); !strings.HasSuffix(string(ev.Pos), want) {
			t.Errorf("snapshot position %s, want it to end with %s", ev.Pos, want)
		}
	}
	if len(snap) < 50 || len(snap) > 52 {
		t.Fatalf("snapshot copied %d documents, want 50 to 52: %v", len(snap), snap)
	}
	for j := range snap {
		if snap[j] != j+1 {
			t.Fatalf("snapshot order %v, want 1, 2, 3, …", snap)
		}
	}
	if got[i].Op != cdc.OpMarker || !bytes.HasPrefix(got[i].Pos, []byte(`{"resume_token":`)) {
		t.Fatalf("after the snapshot: %s %s, want the marker of the start token", got[i].Op, got[i].Pos)
	}
	if !bytes.Contains(got[0].Pos, bytes.TrimSuffix(bytes.TrimPrefix(got[i].Pos, []byte(`{"resume_token":`)), []byte("}"))) {
		t.Errorf("stream starts at %s, not at the snapshot's start token %s", got[i].Pos, got[0].Pos)
	}
	rest := nonMarkers(got[i:])
	if len(rest) != 3 || rest[0].Op != cdc.OpInsert || docID(t, rest[0]) != 51 ||
		docID(t, rest[1]) != 52 || rest[2].Op != cdc.OpUpdate || docID(t, rest[2]) != 3 {
		t.Fatalf("stream after the snapshot = %v, want insert 51, insert 52, update 3", ops(rest))
	}
	if st := src.Stats(); st.SnapshotDone != int64(len(snap)) || st.SnapshotTotal < 50 {
		t.Errorf("snapshot stats %d/%d, want %d/≥50", st.SnapshotDone, st.SnapshotTotal, len(snap))
	}
	if !strings.Contains(bar.String(), "snapshot shop.orders [") || !strings.Contains(bar.String(), fmt.Sprintf("%d/", len(snap))) {
		t.Errorf("progress output %q, want a bar with the documents done", bar.String())
	}
}

// A restart during the snapshot resumes the copy after the last
// committed _id, whatever the types of the _ids after it.
func TestSnapshotResumesAfterLastID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 1; i <= 30; i++ {
		insert(t, e.coll, i)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := e.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config(t)
	cfg.Snapshot = "initial"
	first := New(cfg)
	if err := first.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	got, err := pollUntil(t, first, func(evs []cdc.Event) bool { return len(evs) >= 21 })
	first.Close()
	if err != nil {
		t.Fatal(err)
	}
	cp := cdc.Checkpoint{Source: got[20].Pos, Meta: first.Identity()} // after _id 20
	insert(t, e.coll, 100)

	src := openSource(t, cfg, &cp)
	got, err = pollUntil(t, src, func(evs []cdc.Event) bool {
		for _, ev := range evs {
			if ev.Op == cdc.OpInsert {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range nonMarkers(got) {
		id := bson.Raw(ev.DocumentKey).Lookup("_id")
		if s, ok := id.StringValueOK(); ok {
			ids = append(ids, strconv.Quote(s))
		} else {
			ids = append(ids, fmt.Sprint(id.AsInt64()))
		}
	}
	// 100 is copied (it exists now) and then streamed: a duplicate allowed
	// for a document changed during the copy, ordered after its copy.
	want := "21 22 23 24 25 26 27 28 29 30 100 \"a\" \"b\" 100"
	if strings.Join(ids, " ") != want {
		t.Fatalf("after restart: %v, want %s", ids, want)
	}
}
