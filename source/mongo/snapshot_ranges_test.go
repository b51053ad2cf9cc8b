package mongo

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
)

// mixedIDs fills the collection with 3000 int _ids (some int64, some
// doubles between them) and a few _ids of each other type, sorting before
// and after the numbers.
func mixedIDs(t *testing.T, e *env) int {
	t.Helper()
	var docs []any
	for i := range 3000 {
		var id any = int32(i * 2)
		switch i % 7 {
		case 3:
			id = int64(i * 2)
		case 5:
			id = float64(i*2) + 0.5
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: i}})
	}
	others := []any{nil, bson.MinKey{}, "a", "zz", "b", bson.NewObjectID(), bson.NewObjectID(), true, bson.D{{Key: "k", Value: 1}}, bson.MaxKey{}}
	for i, id := range others {
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: -i}})
	}
	if _, err := e.coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

// snapshotEvents opens a source from cp and polls until n snapshot rows
// (after cp) arrived; it returns their positions and _ids.
func snapshotEvents(t *testing.T, cfg Config, cp *cdc.Checkpoint, n int) (src *Source, pos []string, ids []string) {
	t.Helper()
	src = New(cfg)
	if err := src.Open(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	got, err := pollUntil(t, src, func(evs []cdc.Event) bool {
		c := 0
		for _, ev := range evs {
			if ev.Op == cdc.OpSnapshot {
				c++
			}
		}
		return c >= n
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range got {
		if ev.Op == cdc.OpSnapshot {
			pos = append(pos, string(ev.Pos))
			ids = append(ids, bson.Raw(ev.DocumentKey).Lookup("_id").String())
		}
	}
	return src, pos, ids
}

// TestSnapshotByRanges: a collection copied by _id ranges, three at a
// time, hands out the same events, in the same order and with the same
// positions, as one cursor does, whatever the types of its _ids; and a
// restart in the middle resumes after the last _id, split anew.
func TestSnapshotByRanges(t *testing.T) {
	old := rangeDocs
	rangeDocs = 200
	t.Cleanup(func() { rangeDocs = old })
	e := newEnv(t)
	n := mixedIDs(t, e)
	cfg := e.config(t)
	cfg.Snapshot, cfg.SnapshotBatch = "initial", 37

	cfg.SnapshotParallelism = 1
	one, wantPos, wantIDs := snapshotEvents(t, cfg, nil, n)
	one.Close()
	if len(wantIDs) != n {
		t.Fatalf("one cursor copied %d documents, want %d", len(wantIDs), n)
	}

	cfg.SnapshotParallelism = 3
	testRanges.Store(0)
	par, pos, ids := snapshotEvents(t, cfg, nil, n)
	if r := testRanges.Load(); r < 5 {
		t.Fatalf("the copy was split into %d ranges, want at least 5", r)
	}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("by ranges the _ids came as\n%v\nwant, as one cursor,\n%v", ids, wantIDs)
	}
	if fmt.Sprint(pos) != fmt.Sprint(wantPos) {
		t.Fatalf("by ranges the positions differ from one cursor's")
	}
	id := par.Identity()
	par.Close()

	// A restart after the 1234th row copies the rest, split again.
	testRanges.Store(0)
	cp := cdc.Checkpoint{Source: cdc.Position(wantPos[1233]), Meta: id}
	_, pos, ids = snapshotEvents(t, cfg, &cp, n-1234)
	if testRanges.Load() < 2 {
		t.Errorf("the rest was not split (%d ranges)", testRanges.Load())
	}
	if fmt.Sprint(ids[:n-1234]) != fmt.Sprint(wantIDs[1234:]) || fmt.Sprint(pos[:n-1234]) != fmt.Sprint(wantPos[1234:]) {
		t.Fatalf("after a restart at row 1234 the copy handed out\n%v\nwant\n%v", ids, wantIDs[1234:])
	}
}

// TestSnapshotByRangesCollation: string _ids of a collection with a
// default collation sort by the collation, not by their bytes, so the
// copy is not split on them: it hands out what one cursor does, each
// document once.
func TestSnapshotByRangesCollation(t *testing.T) {
	old := rangeDocs
	rangeDocs = 200
	t.Cleanup(func() { rangeDocs = old })
	e := newEnv(t)
	if err := e.coll.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.coll.Database().CreateCollection(context.Background(), "orders",
		options.CreateCollection().SetCollation(&options.Collation{Locale: "en"})); err != nil {
		t.Fatal(err)
	}
	// Upper and lower case interleaved: by bytes every upper-case _id
	// sorts first, by the collation they mix.
	var docs []any
	for i := range 2000 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("%c%04d", "aBcD"[i%4], i)}})
	}
	if _, err := e.coll.InsertMany(context.Background(), docs); err != nil {
		t.Fatal(err)
	}
	n := len(docs)
	cfg := e.config(t)
	cfg.Snapshot, cfg.SnapshotBatch = "initial", 37

	cfg.SnapshotParallelism = 1
	one, _, wantIDs := snapshotEvents(t, cfg, nil, n)
	one.Close()

	cfg.SnapshotParallelism = 3
	_, _, ids := snapshotEvents(t, cfg, nil, n)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("%s copied twice", id)
		}
		seen[id] = true
	}
	if fmt.Sprint(ids[:n]) != fmt.Sprint(wantIDs) {
		t.Fatalf("by ranges the _ids came as\n%v\nwant, as one cursor,\n%v", ids, wantIDs)
	}
}
