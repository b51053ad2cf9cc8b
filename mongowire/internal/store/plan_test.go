package store

import (
	"fmt"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// genValue draws a value of one of the types an index must order.
func genValue(t *rapid.T, label string, depth int) any {
	kinds := []string{"int", "long", "double", "string", "null", "bool", "doc", "date", "oid", "minkey", "regex"}
	if depth == 0 {
		kinds = append(kinds, "array")
	}
	switch rapid.SampledFrom(kinds).Draw(t, label+"kind") {
	case "int":
		return int32(rapid.IntRange(-3, 3).Draw(t, label))
	case "long":
		return int64(rapid.IntRange(-3, 3).Draw(t, label))
	case "double":
		return rapid.SampledFrom([]float64{-2.5, -1, 0, 0.5, 1, 2, 3.5}).Draw(t, label)
	case "string":
		return rapid.SampledFrom([]string{"", "a", "ab", "b"}).Draw(t, label)
	case "null":
		return nil
	case "bool":
		return rapid.Bool().Draw(t, label)
	case "doc":
		return bson.D{{Key: "x", Value: int32(rapid.IntRange(0, 2).Draw(t, label))}}
	case "date":
		return bson.DateTime(rapid.IntRange(0, 2).Draw(t, label))
	case "oid":
		return bson.ObjectID{11: byte(rapid.IntRange(0, 2).Draw(t, label))}
	case "minkey":
		return bson.MinKey{}
	case "regex":
		return bson.Regex{Pattern: rapid.SampledFrom([]string{"^a", "b", "^$"}).Draw(t, label), Options: ""}
	}
	n := rapid.IntRange(0, 3).Draw(t, label+"len")
	a := bson.A{}
	for i := range n {
		a = append(a, genValue(t, fmt.Sprintf("%s[%d]", label, i), depth+1))
	}
	return a
}

// TestIndexMatchesScan checks, over random documents and predicates, that a
// query answered through an index returns exactly what a collection scan
// returns: the planner may only narrow the candidates, never lose a match.
func TestIndexMatchesScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		key := rapid.SampledFrom([]bson.D{
			{{Key: "a", Value: 1}},
			{{Key: "a", Value: -1}},
			{{Key: "a", Value: 1}, {Key: "b", Value: 1}},
			{{Key: "a.x", Value: 1}},
		}).Draw(t, "key")
		if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: key}}); err != nil {
			t.Fatal(err)
		}
		n := rapid.IntRange(0, 25).Draw(t, "docs")
		for i := range n {
			d := bson.D{{Key: "_id", Value: i}}
			if rapid.IntRange(0, 5).Draw(t, "missing") > 0 {
				d = append(d, bson.E{Key: "a", Value: genValue(t, fmt.Sprintf("a%d", i), 0)})
			}
			d = append(d, bson.E{Key: "b", Value: int32(i % 3)})
			doc, _ := bson.Marshal(d)
			s.Insert(nsA, []bson.Raw{doc}, false) // parallel arrays cannot occur: b is scalar
		}
		// Change and delete some documents, so that index maintenance is
		// checked too.
		for i := range rapid.IntRange(0, n).Draw(t, "changes") {
			id, _ := bson.Marshal(bson.D{{Key: "_id", Value: rapid.IntRange(0, n).Draw(t, "target")}})
			if rapid.Bool().Draw(t, "delete") {
				s.Delete(nsA, id, 1)
				continue
			}
			typ, data, _ := bson.MarshalValue(bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: genValue(t, fmt.Sprintf("set%d", i), 0)}}}})
			s.Update(nsA, UpdateSpec{Filter: id, Update: bson.RawValue{Type: typ, Value: data}})
		}
		path := key[0].Key
		v := genValue(t, "v", 0)
		w := genValue(t, "w", 1)
		var filter bson.D
		switch op := rapid.SampledFrom([]string{"$eq", "$in", "$gt", "$gte", "$lt", "$lte", "range", "literal", "$and"}).Draw(t, "op"); op {
		case "$in":
			// Lists mixing indexable values with null (which also
			// matches a missing field), arrays and regexes.
			list := bson.A{}
			for i := range rapid.IntRange(0, 4).Draw(t, "in len") {
				list = append(list, genValue(t, fmt.Sprintf("in%d", i), 0))
			}
			filter = bson.D{{Key: path, Value: bson.D{{Key: "$in", Value: list}}}}
		case "literal": // {a: v}: a regex matches strings, an array itself or an element
			filter = bson.D{{Key: path, Value: v}}
		case "$and": // an indexable predicate next to one that is not
			filter = bson.D{{Key: "$and", Value: bson.A{
				bson.D{{Key: path, Value: bson.D{{Key: "$in", Value: bson.A{v, nil}}}}},
				bson.D{{Key: path, Value: bson.D{{Key: "$gte", Value: w}}}},
			}}}
		case "range":
			filter = bson.D{{Key: path, Value: bson.D{{Key: "$gte", Value: v}, {Key: "$lt", Value: w}}}}
		default:
			filter = bson.D{{Key: path, Value: bson.D{{Key: op, Value: v}}}}
		}
		fraw, _ := bson.Marshal(filter)
		f, err := mql.CompileFilter(fraw)
		if err != nil {
			t.Skip("filter not valid:", err)
		}
		got, err := s.Find(nsA, FindSpec{Filter: fraw})
		if err != nil {
			t.Fatal(err)
		}
		var want []bson.Raw
		docs, err := s.Find(nsA, FindSpec{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if f.Match(d) {
				want = append(want, d)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			plan, _ := s.Explain(nsA, FindSpec{Filter: fraw})
			t.Fatalf("filter %v through %+v:\n got %v\nwant %v", bson.Raw(fraw), plan, got, want)
		}
	})
}

// TestIndexSortMatchesSort checks that a sorted query walking an index, in
// either direction, over a prefix of a compound index, within the filter's
// own index bounds or not, returns what a stable sort of every match
// returns (ties in natural order), and that the plan says when the index
// gave the order.
func TestIndexSortMatchesSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		key := rapid.SampledFrom([]bson.D{
			{{Key: "a", Value: int32(1)}},
			{{Key: "a", Value: int32(-1)}},
			{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(1)}},
			{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(-1)}},
			{{Key: "a", Value: int32(-1)}, {Key: "b", Value: int32(1)}, {Key: "c", Value: int32(1)}},
		}).Draw(t, "index")
		if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Name: "ix", Key: key}}); err != nil {
			t.Fatal(err)
		}
		arrays := rapid.Bool().Draw(t, "arrays") // a multikey index cannot give the order
		depth := 1
		if arrays {
			depth = 0
		}
		for i := range rapid.IntRange(0, 30).Draw(t, "docs") {
			d := bson.D{{Key: "_id", Value: i}}
			if rapid.IntRange(0, 5).Draw(t, "missing") > 0 {
				d = append(d, bson.E{Key: "a", Value: genValue(t, fmt.Sprintf("a%d", i), depth)})
			}
			if rapid.IntRange(0, 5).Draw(t, "missing b") > 0 {
				d = append(d, bson.E{Key: "b", Value: int32(rapid.IntRange(0, 2).Draw(t, "b"))})
			}
			doc, _ := bson.Marshal(d)
			s.Insert(nsA, []bson.Raw{doc}, true)
		}
		var sortKey bson.D
		for _, f := range []string{"a", "b", "c"}[:rapid.IntRange(1, 3).Draw(t, "sort fields")] {
			sortKey = append(sortKey, bson.E{Key: f, Value: rapid.SampledFrom([]int32{1, -1}).Draw(t, "dir "+f)})
		}
		sortSpec, _ := bson.Marshal(sortKey)
		v, w := genValue(t, "v", 1), genValue(t, "w", 1)
		filterDoc := rapid.SampledFrom([]bson.D{
			{},
			{{Key: "b", Value: 1}},
			{{Key: "b", Value: bson.D{{Key: "$ne", Value: 2}}}},
			{{Key: "a", Value: v}},
			{{Key: "a", Value: bson.D{{Key: "$in", Value: bson.A{v, w}}}}},
			{{Key: "a", Value: bson.D{{Key: "$gte", Value: v}}}},
			{{Key: "a", Value: bson.D{{Key: "$gt", Value: v}, {Key: "$lte", Value: w}}}},
		}).Draw(t, "filter")
		filter, _ := bson.Marshal(filterDoc)
		f, err := mql.CompileFilter(filter)
		if err != nil {
			t.Skip("filter not valid:", err)
		}
		sorter, err := mql.CompileSort(sortSpec)
		if err != nil {
			t.Fatal(err)
		}
		skip := int64(rapid.IntRange(0, 5).Draw(t, "skip"))
		limit := int64(rapid.IntRange(0, 10).Draw(t, "limit"))
		spec := FindSpec{Filter: filter, Sort: sortSpec, Skip: skip, Limit: limit}
		got, err := s.Find(nsA, spec)
		if err != nil {
			t.Fatal(err)
		}

		// The reference: every document in natural order, filtered, then
		// sorted stably with Sort.Compare.
		docs, err := s.Find(nsA, FindSpec{})
		if err != nil {
			t.Fatal(err)
		}
		var want []bson.Raw
		for _, d := range docs {
			if f.Match(d) {
				want = append(want, d)
			}
		}
		sort.SliceStable(want, func(i, j int) bool { return sorter.Compare(want[i], want[j]) < 0 })
		want = window(want, skip, limit)
		plan, err := s.Explain(nsA, spec)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("filter %v sort %v skip %d limit %d through %+v:\n got %v\nwant %v", bson.Raw(filter), bson.Raw(sortSpec), skip, limit, plan, got, want)
		}

		// Without arrays, a sort on a prefix of the index in its
		// direction or the opposite one walks the index (the filter,
		// when it has an index predicate, is on the same index).
		fits, backward := len(sortKey) <= len(key), false
		for i := 0; fits && i < len(sortKey); i++ {
			same := sortKey[i].Value.(int32) == key[i].Value.(int32)
			if i == 0 {
				backward = !same
			}
			fits = same != backward
		}
		if !arrays && plan.SortedByIndex != fits {
			t.Fatalf("sort %v on index %v: plan %+v, want SortedByIndex %v", bson.Raw(sortSpec), key, plan, fits)
		}
		if plan.SortedByIndex && (plan.Backward != backward || plan.Index != "ix") {
			t.Fatalf("sort %v on index %v: plan %+v, want index ix backward %v", bson.Raw(sortSpec), key, plan, backward)
		}
	})
}

// TestIndexSortStopsEarly checks that a limited sort walking an index
// examines only the keys it needs, from either end.
func TestIndexSortStopsEarly(t *testing.T) {
	s := openMem(t)
	docs := make([]bson.Raw, 1000)
	for i := range docs {
		docs[i] = raw(t, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 500}, {Key: "g", Value: i % 7}})
	}
	if _, errs := s.Insert(nsA, docs, true); len(errs) > 0 {
		t.Fatal(errs[0].Err)
	}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: 1}, {Key: "g", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		sort, filter bson.D
		limit        int64
		first        []int // _ids of the first documents returned
		maxKeys      int
		backward     bool
		index        string
	}{
		"_id backward": {
			sort: bson.D{{Key: "_id", Value: -1}}, limit: 3,
			first: []int{999, 998, 997}, maxKeys: 3, backward: true, index: "_id_",
		},
		"compound prefix, ties in natural order": {
			sort: bson.D{{Key: "k", Value: 1}}, limit: 3,
			first: []int{0, 500, 1}, maxKeys: 5, index: "k_1_g_1",
		},
		"compound backward": {
			sort: bson.D{{Key: "k", Value: -1}, {Key: "g", Value: -1}}, limit: 2,
			first: []int{999, 499}, maxKeys: 3, backward: true, index: "k_1_g_1",
		},
		"range on the sort index, backward": {
			sort: bson.D{{Key: "k", Value: -1}}, filter: bson.D{{Key: "k", Value: bson.D{{Key: "$lt", Value: 100}}}}, limit: 2,
			first: []int{99, 599}, maxKeys: 3, backward: true, index: "k_1_g_1",
		},
		"$in on the sort index": {
			sort: bson.D{{Key: "k", Value: 1}}, filter: bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{300, 7}}}}}, limit: 4,
			first: []int{7, 507, 300, 800}, maxKeys: 6, index: "k_1_g_1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := FindSpec{Sort: raw(t, tc.sort), Filter: raw(t, append(bson.D{}, tc.filter...)), Limit: tc.limit}
			got, err := s.Find(nsA, spec)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for _, d := range got {
				ids = append(ids, int(d.Lookup("_id").AsInt64()))
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.first) {
				t.Errorf("got _ids %v, want %v", ids, tc.first)
			}
			plan, err := s.Explain(nsA, spec)
			if err != nil {
				t.Fatal(err)
			}
			if !plan.SortedByIndex || plan.Backward != tc.backward || plan.Index != tc.index || plan.KeysExamined > tc.maxKeys {
				t.Errorf("plan %+v, want index %s sorted backward=%v with at most %d keys", plan, tc.index, tc.backward, tc.maxKeys)
			}
		})
	}
}
