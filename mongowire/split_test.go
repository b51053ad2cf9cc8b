package mongowire_test

import (
	"slices"
	"testing"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire/internal/store"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// splitFixture fills co.split with n documents of one size, _id 0..n-1,
// and returns that size.
func splitFixture(t *testing.T, c *mongo.Client, n int) int64 {
	t.Helper()
	coll := c.Database("co").Collection("split")
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(7)}, {Key: "pad", Value: "0123456789abcdef"}}
	}
	if _, err := coll.InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	b, _ := bson.Marshal(docs[0])
	return int64(len(b))
}

func splitIDs(t *testing.T, raw bson.Raw) []int32 {
	t.Helper()
	vals, err := raw.Lookup("splitKeys").Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	out := []int32{}
	for _, v := range vals {
		out = append(out, v.Document().Lookup("_id").Int32())
	}
	return out
}

// TestSplitVector: mongod's split rule, a split point every
// maxChunkSizeBytes / (2 * average document size) documents (or every
// maxChunkObjects), the key after each run of that many.
func TestSplitVector(t *testing.T) {
	_, c := setup(t)
	size := splitFixture(t, c, 1000)
	admin := c.Database("admin")
	byID := bson.D{{Key: "_id", Value: 1}}
	cmd := func(extra ...bson.E) bson.D {
		return append(bson.D{{Key: "splitVector", Value: "co.split"}, {Key: "keyPattern", Value: byID}}, extra...)
	}
	tests := map[string]struct {
		cmd  bson.D
		want []int32
	}{
		"every 100":         {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 200 * size}), []int32{100, 201, 302, 403, 504, 605, 706, 807, 908}},
		"maxSplitPoints":    {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 200 * size}, bson.E{Key: "maxSplitPoints", Value: 3}), []int32{100, 201, 302}},
		"maxChunkObjects":   {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 200 * size}, bson.E{Key: "maxChunkObjects", Value: 300}), []int32{100, 201, 302, 403, 504, 605, 706, 807, 908}},
		"fewer objects":     {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 2000 * size}, bson.E{Key: "maxChunkObjects", Value: 400}), nil},
		"objects win":       {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 1000 * size}, bson.E{Key: "maxChunkObjects", Value: 250}), []int32{250, 501, 752}},
		"range":             {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 200 * size}, bson.E{Key: "min", Value: bson.D{{Key: "_id", Value: 500}}}, bson.E{Key: "max", Value: bson.D{{Key: "_id", Value: 800}}}), []int32{600, 701}},
		"smaller than one":  {cmd(bson.E{Key: "maxChunkSizeBytes", Value: 1001 * size}), nil},
		"maxChunkSize (MB)": {cmd(bson.E{Key: "maxChunkSize", Value: 1}), nil},
		"force: the median": {cmd(bson.E{Key: "force", Value: true}), []int32{500}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := splitIDs(t, run(t, admin, tt.cmd))
			if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("split keys %v, want %v", got, tt.want)
			}
		})
	}
	// "objects win" above, and "every 100": the first split is after 100
	// (or 250) documents, then one more each time, as mongod counts.

	// A key with a single value has nowhere to split.
	coll := c.Database("co").Collection("split")
	if _, err := coll.Indexes().CreateOne(t.Context(), mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	raw := run(t, admin, bson.D{{Key: "splitVector", Value: "co.split"}, {Key: "keyPattern", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "maxChunkSizeBytes", Value: 10 * size}})
	if keys, _ := raw.Lookup("splitKeys").Array().Values(); len(keys) != 0 {
		t.Errorf("single-valued key: split keys %v, want none", keys)
	}

	err := admin.RunCommand(t.Context(), bson.D{{Key: "splitVector", Value: "co.split"}, {Key: "keyPattern", Value: bson.D{{Key: "pad", Value: 1}}}, {Key: "maxChunkSizeBytes", Value: 100}}).Err()
	wantCode(t, err, 27, "couldn't find index over splitting key")
	err = admin.RunCommand(t.Context(), cmd()).Err()
	wantCode(t, err, 72, "maxChunkSize")
}

// TestDataSize: the whole collection, or the documents of a key range.
func TestDataSize(t *testing.T) {
	_, c := setup(t)
	size := splitFixture(t, c, 1000)
	admin := c.Database("admin")
	raw := run(t, admin, bson.D{{Key: "dataSize", Value: "co.split"}})
	if got, n := raw.Lookup("size").AsInt64(), raw.Lookup("numObjects").AsInt64(); got != 1000*size || n != 1000 {
		t.Errorf("whole collection: size %d, numObjects %d; want %d, 1000", got, n, 1000*size)
	}
	raw = run(t, admin, bson.D{{Key: "dataSize", Value: "co.split"}, {Key: "keyPattern", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "min", Value: bson.D{{Key: "_id", Value: 100}}}, {Key: "max", Value: bson.D{{Key: "_id", Value: 200}}}})
	if got, n := raw.Lookup("size").AsInt64(), raw.Lookup("numObjects").AsInt64(); got != 100*size || n != 100 {
		t.Errorf("range: size %d, numObjects %d; want %d, 100", got, n, 100*size)
	}
	raw = run(t, admin, bson.D{{Key: "dataSize", Value: "co.nothing"}})
	if n := raw.Lookup("numObjects").AsInt64(); n != 0 {
		t.Errorf("missing collection: numObjects %d", n)
	}
}

// BenchmarkSplitVector: splitVector over the _id index of 1,000,000
// documents of ~60 bytes, 64 split points, through the driver.
//
//	go test ./mongowire -run '^$' -bench 'SplitVector' -benchtime 5x -count 1
func BenchmarkSplitVector(b *testing.B) {
	s := testenv.MongoWire(b)
	c := testenv.MongoClient(b, s.URI())
	ns := store.Namespace{DB: "co", Coll: "big"}
	const n = 1_000_000
	docs := make([]bson.Raw, 0, 10_000)
	for i := range n {
		d, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(i)}, {Key: "pad", Value: "0123456789abcdef0123456789abcdef"}})
		docs = append(docs, d)
		if len(docs) == cap(docs) {
			if _, errs := s.Store().Insert(ns, docs, true); len(errs) > 0 {
				b.Fatal(errs[0].Err)
			}
			docs = docs[:0]
		}
	}
	cmdRaw := func(cmd bson.D) bson.Raw {
		r, err := c.Database("admin").RunCommand(b.Context(), cmd).Raw()
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	info := cmdRaw(bson.D{{Key: "dataSize", Value: "co.big"}})
	size := info.Lookup("size").AsInt64()
	cmd := bson.D{{Key: "splitVector", Value: "co.big"}, {Key: "keyPattern", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "maxChunkSizeBytes", Value: 2 * size / 64}}
	for b.Loop() {
		raw := cmdRaw(cmd)
		if keys, _ := raw.Lookup("splitKeys").Array().Values(); len(keys) < 60 {
			b.Fatalf("%d split keys, want about 64", len(keys))
		}
	}
}
