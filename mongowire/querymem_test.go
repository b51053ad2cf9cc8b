package mongowire_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// The query-memory tests lower the limits through Config so that they
// need a few MB, not the GBs of mongod's defaults; the logic is the same.

// smallLimits: a blocking stage may hold 256 KiB, a $lookup gather 1 MiB
// for one document, and all queries together 8 MiB.
func smallLimits(c *mongowire.Config) {
	c.StageMemoryLimit = 256 << 10
	c.LookupMemoryLimit = 1 << 20
	c.MaxQueryMemory = 8 << 20
}

// fill inserts n documents {_id: i, x: <random>, g: i % groups, pad: <size bytes>}.
func fill(t *testing.T, coll *mongo.Collection, n, groups, size int) {
	t.Helper()
	pad := strings.Repeat("p", size)
	r := rand.New(rand.NewPCG(1, 2))
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "x", Value: r.Int64N(1 << 40)}, {Key: "g", Value: i % groups}, {Key: "pad", Value: pad}}
	}
	for len(docs) > 0 {
		k := min(len(docs), 500)
		if _, err := coll.InsertMany(t.Context(), docs[:k]); err != nil {
			t.Fatal(err)
		}
		docs = docs[k:]
	}
}

func aggregate(t *testing.T, coll *mongo.Collection, pipeline any, opts ...options.Lister[options.AggregateOptions]) ([]bson.Raw, error) {
	t.Helper()
	cur, err := coll.Aggregate(t.Context(), pipeline, opts...)
	if err != nil {
		return nil, err
	}
	var out []bson.Raw
	for cur.Next(t.Context()) {
		out = append(out, append(bson.Raw(nil), cur.Current...))
	}
	return out, cur.Err()
}

// The probe of issue 25: a self-$lookup then $count materialised every
// joined document (1.7 GB for a 2 MB collection). Streamed, it holds one
// joined document at a time, and the answer is the count.
func TestLookupCountStreams(t *testing.T) {
	_, client := setup(t, smallLimits)
	coll := client.Database("mem").Collection("c")
	fill(t, coll, 400, 1, 2000) // ~800 KB: each joined document ~800 KB, 320 MB in all

	stop := sampleLiveHeap(2 * time.Millisecond)
	got, err := aggregate(t, coll, bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "all"}}}},
		bson.D{{Key: "$count", Value: "n"}},
	})
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lookup("n").AsInt64() != 400 {
		t.Fatalf("got %v, want [{n: 400}]", got)
	}
	if peak > 64<<20 {
		t.Errorf("heap peaked %d MB above its start; the joined documents were not streamed", peak>>20)
	}
	t.Logf("heap peak above start: %.1f MB", float64(peak)/(1<<20))

	// Without $count the result itself is 320 MB: the query fails on the
	// server's budget, the server does not.
	_, err = aggregate(t, coll, bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "all"}}}},
	})
	wantCode(t, err, 146, "memory budget")
	if se, ok := err.(mongo.ServerError); !ok || !se.HasErrorCodeWithMessage(146, "budget") {
		t.Errorf("error %v is not a server error with code 146", err)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Name != "ExceededMemoryLimit" {
		t.Errorf("code name %q, want ExceededMemoryLimit", ce.Name)
	}
	if err := client.Ping(t.Context(), nil); err != nil {
		t.Fatalf("ping after the failed query: %v", err)
	}
}

// A $lookup gathering more than the limit for one document fails with
// 4568, as mongod's internalLookupStageIntermediateDocumentMaxSizeBytes.
func TestLookupIntermediateLimit(t *testing.T) {
	_, client := setup(t, smallLimits)
	db := client.Database("mem")
	coll := db.Collection("c")
	fill(t, coll, 1000, 1, 2000) // 2 MB: every document joins all of it

	_, err := aggregate(t, coll, bson.A{
		bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "c"}, {Key: "localField", Value: "g"}, {Key: "foreignField", Value: "g"}, {Key: "as", Value: "all"}}}},
		bson.D{{Key: "$count", Value: "n"}},
	})
	wantCode(t, err, 4568, "matching pipeline's $lookup stage exceeds 1048576 bytes")

	// The probe's 22 nested $lookups on two documents: each level doubles
	// the joined document.
	two := db.Collection("two")
	if _, err := two.InsertMany(t.Context(), []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	stage := bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "two"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "j"}}}}
	for range 21 {
		stage = bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "two"}, {Key: "pipeline", Value: bson.A{stage}}, {Key: "as", Value: "j"}}}}
	}
	stop := sampleLiveHeap(2 * time.Millisecond)
	_, err = aggregate(t, two, bson.A{stage, bson.D{{Key: "$count", Value: "n"}}})
	peak := stop()
	wantCode(t, err, 4568, "$lookup")
	if peak > 64<<20 {
		t.Errorf("heap peaked %d MB above its start", peak>>20)
	}
}

// Ordinary joins give what they gave before: equality and pipeline forms.
func TestLookupJoinsUnchanged(t *testing.T) {
	_, client := setup(t, smallLimits)
	db := client.Database("mem")
	orders, items := db.Collection("orders"), db.Collection("items")
	if _, err := orders.InsertMany(t.Context(), []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "a"}, {Key: "qty", Value: 2}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "b"}, {Key: "qty", Value: 1}},
		bson.D{{Key: "_id", Value: 3}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := items.InsertMany(t.Context(), []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "price", Value: 10}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "price", Value: 5}},
		bson.D{{Key: "_id", Value: "c"}, {Key: "price", Value: 1}, {Key: "item", Value: nil}},
	}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pipeline bson.A
		want     string
	}{
		"localField/foreignField": {
			pipeline: bson.A{bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "localField", Value: "item"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "i"}}}}},
			want: `{"_id": {"$numberInt":"1"},"item": "a","qty": {"$numberInt":"2"},"i": [{"_id": "a","price": {"$numberInt":"10"}}]}` +
				`{"_id": {"$numberInt":"2"},"item": "b","qty": {"$numberInt":"1"},"i": [{"_id": "b","price": {"$numberInt":"5"}}]}` +
				`{"_id": {"$numberInt":"3"},"i": []}`,
		},
		"missing local matches null and missing": {
			pipeline: bson.A{
				bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: 3}}}},
				bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "localField", Value: "item"}, {Key: "foreignField", Value: "item"}, {Key: "as", Value: "i"}}}},
			},
			want: `{"_id": {"$numberInt":"3"},"i": [{"_id": "a","price": {"$numberInt":"10"}},{"_id": "b","price": {"$numberInt":"5"}},{"_id": "c","price": {"$numberInt":"1"},"item": null}]}`,
		},
		"pipeline with let": {
			pipeline: bson.A{
				bson.D{{Key: "$match", Value: bson.D{{Key: "item", Value: bson.D{{Key: "$exists", Value: true}}}}}},
				bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "let", Value: bson.D{{Key: "it", Value: "$item"}, {Key: "q", Value: "$qty"}}},
					{Key: "pipeline", Value: bson.A{
						bson.D{{Key: "$match", Value: bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{"$_id", "$$it"}}}}}}},
						bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "total", Value: bson.D{{Key: "$multiply", Value: bson.A{"$price", "$$q"}}}}}}},
					}}, {Key: "as", Value: "t"}}}},
				bson.D{{Key: "$project", Value: bson.D{{Key: "t", Value: 1}}}},
			},
			want: `{"_id": {"$numberInt":"1"},"t": [{"total": {"$numberInt":"20"}}]}` +
				`{"_id": {"$numberInt":"2"},"t": [{"total": {"$numberInt":"5"}}]}`,
		},
		"unwind then group then sort": {
			pipeline: bson.A{
				bson.D{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "items"}, {Key: "pipeline", Value: bson.A{}}, {Key: "as", Value: "all"}}}},
				bson.D{{Key: "$unwind", Value: "$all"}},
				bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$all._id"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
				bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: -1}}}},
				bson.D{{Key: "$limit", Value: 2}},
			},
			want: `{"_id": "c","n": {"$numberInt":"3"}}{"_id": "b","n": {"$numberInt":"3"}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := aggregate(t, orders, tc.pipeline)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, d := range got {
				b.WriteString(d.String())
			}
			if b.String() != tc.want {
				t.Errorf("got  %s\nwant %s", b.String(), tc.want)
			}
		})
	}
}

// Past the stage limit $sort and $group spill to the data directory and
// answer as in memory; with allowDiskUse: false they fail with 292.
func TestSortGroupSpill(t *testing.T) {
	dir := t.TempDir()
	_, client := setup(t, smallLimits, func(c *mongowire.Config) { c.DataDir = dir })
	coll := client.Database("mem").Collection("c")
	const n, groups = 3000, 40
	fill(t, coll, n, groups, 300) // ~1 MB: four times the stage limit

	var all []bson.Raw
	cur, err := coll.Find(t.Context(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(t.Context(), &all); err != nil {
		t.Fatal(err)
	}

	t.Run("sort", func(t *testing.T) {
		got, err := aggregate(t, coll, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "x", Value: 1}}}}, bson.D{{Key: "$project", Value: bson.D{{Key: "x", Value: 1}}}}})
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, len(all))
		for i, d := range all {
			want[i] = d.Lookup("x").Int64()
		}
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		if len(got) != n {
			t.Fatalf("got %d documents, want %d", len(got), n)
		}
		for i, d := range got {
			if x := d.Lookup("x").Int64(); x != want[i] {
				t.Fatalf("document %d: x = %d, want %d", i, x, want[i])
			}
		}
		_, err = aggregate(t, coll, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "x", Value: 1}}}}}, options.Aggregate().SetAllowDiskUse(false))
		wantCode(t, err, 292, "allowDiskUse")
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Name != "QueryExceededMemoryLimitNoDiskUseAllowed" {
			t.Errorf("code name %q, want QueryExceededMemoryLimitNoDiskUseAllowed", ce.Name)
		}
	})

	t.Run("sort then limit keeps the top only", func(t *testing.T) {
		got, err := aggregate(t, coll, bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "x", Value: -1}}}}, bson.D{{Key: "$limit", Value: 5}}}, options.Aggregate().SetAllowDiskUse(false))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, len(all))
		for i, d := range all {
			want[i] = d.Lookup("x").Int64()
		}
		sort.Slice(want, func(i, j int) bool { return want[i] > want[j] })
		if len(got) != 5 {
			t.Fatalf("got %d documents, want 5", len(got))
		}
		for i, d := range got {
			if x := d.Lookup("x").Int64(); x != want[i] {
				t.Fatalf("document %d: x = %d, want %d", i, x, want[i])
			}
		}
	})

	t.Run("group counts its groups, not the collection", func(t *testing.T) {
		got, err := aggregate(t, coll, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}}, options.Aggregate().SetAllowDiskUse(false))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != groups {
			t.Fatalf("got %d groups, want %d", len(got), groups)
		}
	})

	group := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}, {Key: "max", Value: bson.D{{Key: "$max", Value: "$x"}}}, {Key: "ids", Value: bson.D{{Key: "$push", Value: "$_id"}}}, {Key: "pads", Value: bson.D{{Key: "$push", Value: "$pad"}}}}}}
	byID := bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}
	groupTests := map[string]bson.A{
		"group pushing past the limit":          {group, byID},
		"group of documents the pipeline built": {bson.D{{Key: "$addFields", Value: bson.D{{Key: "y", Value: "$pad"}}}}, group, byID},
	}
	for name, pipeline := range groupTests {
		t.Run(name, func(t *testing.T) {
			checkGroups(t, coll, all, groups, pipeline)
		})
	}
	t.Run("group without disk use", func(t *testing.T) {
		_, err := aggregate(t, coll, bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "d", Value: bson.D{{Key: "$first", Value: "$$ROOT"}}}}}}}, options.Aggregate().SetAllowDiskUse(false))
		wantCode(t, err, 292, "allowDiskUse")
	})

	left, err := os.ReadDir(filepath.Join(dir, "_tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("spill files left behind: %v", left)
	}
}

// checkGroups runs a pipeline grouping by g and checks each group's n,
// max and ids against the documents all.
func checkGroups(t *testing.T, coll *mongo.Collection, all []bson.Raw, groups int, pipeline bson.A) {
	t.Helper()
	{
		got, err := aggregate(t, coll, pipeline)
		if err != nil {
			t.Fatal(err)
		}
		type agg struct {
			n   int32
			max int64
			ids []int32
		}
		want := make([]agg, groups)
		for _, d := range all {
			g := d.Lookup("g").Int32()
			want[g].n++
			want[g].max = max(want[g].max, d.Lookup("x").Int64())
			want[g].ids = append(want[g].ids, d.Lookup("_id").Int32())
		}
		if len(got) != groups {
			t.Fatalf("got %d groups, want %d", len(got), groups)
		}
		for i, d := range got {
			var ids []int32
			vals, _ := d.Lookup("ids").Array().Values()
			for _, v := range vals {
				ids = append(ids, v.Int32())
			}
			g := agg{n: d.Lookup("n").Int32(), max: d.Lookup("max").Int64(), ids: ids}
			if d.Lookup("_id").Int32() != int32(i) || !reflect.DeepEqual(g, want[i]) {
				t.Fatalf("group %d: got %v, want %+v", i, d, want[i])
			}
		}
	}
}

// The blocking stages that do not spill fail with 292 past the stage
// limit, allowDiskUse or not: never silently past it.
func TestBlockingStagesHeldToLimit(t *testing.T) {
	_, client := setup(t, smallLimits)
	coll := client.Database("mem").Collection("c")
	fill(t, coll, 1000, 10, 300) // ~330 KB

	tests := map[string]bson.D{
		"$bucketAuto":      {{Key: "$bucketAuto", Value: bson.D{{Key: "groupBy", Value: "$x"}, {Key: "buckets", Value: 4}}}},
		"$setWindowFields": {{Key: "$setWindowFields", Value: bson.D{{Key: "sortBy", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "output", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$rank", Value: bson.D{}}}}}}}}},
		"$bucket":          {{Key: "$bucket", Value: bson.D{{Key: "groupBy", Value: "$g"}, {Key: "boundaries", Value: bson.A{0, 5, 10}}}}},
		"$sortByCount":     {{Key: "$sortByCount", Value: "$g"}},
		"$facet":           {{Key: "$facet", Value: bson.D{{Key: "a", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{}}}}}}}},
	}
	for name, stage := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := aggregate(t, coll, bson.A{stage})
			wantCode(t, err, 292, name)
			_, err = aggregate(t, coll, bson.A{bson.D{{Key: "$limit", Value: 100}}, stage})
			if err != nil {
				t.Errorf("within the limit: %v", err)
			}
		})
	}
}

// No reply carries a document over 16 MiB: 10334 BSONObjectTooLarge,
// from aggregate and find alike.
func TestResultDocumentOver16MB(t *testing.T) {
	_, client := setup(t)
	coll := client.Database("mem").Collection("big")
	mb := strings.Repeat("b", 1<<20)
	docs := make([]any, 17)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "s", Value: mb}, {Key: "a", Value: bson.A{1, 2}}}
	}
	if _, err := coll.InsertMany(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	_, err := aggregate(t, coll, bson.A{
		bson.D{{Key: "$unwind", Value: "$a"}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}}}}},
	})
	wantCode(t, err, 10334, "BSONObj size")

	err = coll.FindOne(t.Context(), bson.D{{Key: "_id", Value: 0}}, options.FindOne().SetProjection(bson.D{
		{Key: "s", Value: bson.D{{Key: "$concatArrays", Value: bson.A{
			bson.A{"$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s"}, bson.A{"$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s", "$s"},
		}}}},
	})).Err()
	wantCode(t, err, 10334, "BSONObj size")
}

// The server's budget bounds all queries together: one whose buffers
// would pass it fails with 146, and what it held is given back.
func TestQueryBudget(t *testing.T) {
	_, client := setup(t, func(c *mongowire.Config) {
		c.MaxQueryMemory = 1 << 20
	})
	coll := client.Database("mem").Collection("c")
	fill(t, coll, 2000, 10, 1000) // ~2 MB

	sortAll := bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "x", Value: 1}}}}, bson.D{{Key: "$count", Value: "n"}}}
	for range 3 { // the failures give back what they reserved
		_, err := aggregate(t, coll, sortAll)
		wantCode(t, err, 146, fmt.Sprintf("budget for queries of %d bytes", 1<<20))
	}
	got, err := aggregate(t, coll, bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 500}}}}}}, bson.D{{Key: "$sort", Value: bson.D{{Key: "x", Value: 1}}}}, bson.D{{Key: "$count", Value: "n"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lookup("n").AsInt64() != 500 {
		t.Fatalf("got %v", got)
	}
}
