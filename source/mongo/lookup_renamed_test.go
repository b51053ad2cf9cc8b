package mongo

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// TestMultiUpdateLookupAfterRename: with full_document update_lookup, an
// update read after its collection was renamed (the server's lookup by
// namespace finds nothing) carries the document from the new name; one
// whose document was deleted since stays without one.
func TestMultiUpdateLookupAfterRename(t *testing.T) {
	e := newMultiEnv(t, "shop.a")
	cfg := e.config(t, "shop", "*")
	cfg.FullDocument = "update_lookup"
	src := openSource(t, cfg, nil)
	insert(t, e.coll("shop.a"), 1, 2)
	evs, err := pollUntil(t, src, countOps(2))
	if err != nil {
		t.Fatal(err)
	}
	last := nonMarkers(evs)[1]
	cp := checkpointOf(last.Pos, src.Identity())
	src.Close()

	// While the source is stopped: both documents updated, one deleted,
	// and the collection renamed.
	ctx := context.Background()
	a := e.coll("shop.a")
	for _, id := range []int{1, 2} {
		if _, err := a.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 10 + id}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	e.adminCommand(t, bson.D{{Key: "renameCollection", Value: "shop.a"}, {Key: "to", Value: "shop.b"}})

	again := openSource(t, cfg, &cp)
	evs, err = pollUntil(t, again, countOps(4))
	if err != nil {
		t.Fatal(err)
	}
	evs = nonMarkers(evs)
	wantChanges(t, changes(t, evs),
		mchange{cdc.OpUpdate, "shop.a", 1}, mchange{cdc.OpUpdate, "shop.a", 2},
		mchange{cdc.OpDelete, "shop.a", 2}, mchange{cdc.OpRename, "shop.a", -1})
	if v, ok := bson.Raw(evs[0].FullDocument).Lookup("v").AsInt64OK(); !ok || v != 11 {
		t.Errorf("update of _id 1 read after the rename: full document %v, want the new name's {_id: 1, v: 11}", bson.Raw(evs[0].FullDocument))
	}
	if evs[1].FullDocument != nil {
		t.Errorf("update of the deleted _id 2: full document %v, want none", bson.Raw(evs[1].FullDocument))
	}
}
