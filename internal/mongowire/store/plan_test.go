package store

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/internal/mongowire/mql"
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

// TestIndexSortMatchesSort checks that a sorted, limited query walking an
// index returns what a stable sort of every match returns.
func TestIndexSortMatchesSort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		dir := rapid.SampledFrom([]int32{1, -1}).Draw(t, "index dir")
		if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "a", Value: dir}}}}); err != nil {
			t.Fatal(err)
		}
		for i := range rapid.IntRange(0, 30).Draw(t, "docs") {
			d := bson.D{{Key: "_id", Value: i}, {Key: "b", Value: int32(i % 3)}}
			if rapid.IntRange(0, 5).Draw(t, "missing") > 0 {
				d = append(d, bson.E{Key: "a", Value: genValue(t, fmt.Sprintf("a%d", i), 1)})
			}
			doc, _ := bson.Marshal(d)
			s.Insert(nsA, []bson.Raw{doc}, true)
		}
		sortDir := rapid.SampledFrom([]int32{1, -1}).Draw(t, "sort dir")
		sortSpec, _ := bson.Marshal(bson.D{{Key: "a", Value: sortDir}})
		filter, _ := bson.Marshal(rapid.SampledFrom([]bson.D{{}, {{Key: "b", Value: 1}}, {{Key: "b", Value: bson.D{{Key: "$ne", Value: 2}}}}}).Draw(t, "filter"))
		skip := int64(rapid.IntRange(0, 5).Draw(t, "skip"))
		limit := int64(rapid.IntRange(1, 10).Draw(t, "limit"))
		got, err := s.Find(nsA, FindSpec{Filter: filter, Sort: sortSpec, Skip: skip, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.Find(nsA, FindSpec{Filter: filter, Sort: sortSpec})
		if err != nil {
			t.Fatal(err)
		}
		plan, _ := s.Explain(nsA, FindSpec{Filter: filter, Sort: sortSpec, Skip: skip, Limit: limit})
		if (plan.Index != "") != (sortDir == dir) {
			t.Fatalf("sort %d on an index of direction %d used %q", sortDir, dir, plan.Index)
		}
		if want := window(all, skip, limit); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("sort %v skip %d limit %d through %+v:\n got %v\nwant %v", bson.Raw(sortSpec), skip, limit, plan, got, want)
		}
	})
}
