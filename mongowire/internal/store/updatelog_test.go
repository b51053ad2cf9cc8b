package store

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"
)

// updateEntry runs one update of the document before and returns the oplog
// entries it wrote.
func updateEntry(t *testing.T, before, filter, update string, arrayFilters ...string) []OplogEntry {
	t.Helper()
	s := openMem(t)
	seed(t, s, before)
	start := s.Oplog().Newest()
	spec := UpdateSpec{Filter: js(t, filter), Update: jsv(t, update)}
	for _, f := range arrayFilters {
		spec.ArrayFilters = append(spec.ArrayFilters, js(t, f))
	}
	if _, err := s.Update(nsA, spec); err != nil {
		t.Fatalf("update %s: %v", update, err)
	}
	es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
	return es
}

// TestUpdateDescription checks the descriptions of modifier-style updates
// against what MongoDB 7.0's update driver logs: the paths the operators
// wrote, not a diff of the documents.
func TestUpdateDescription(t *testing.T) {
	const (
		noRemoved = `"removedFields": [], "truncatedArrays": []`
		none      = "" // no oplog entry: the update changed nothing
	)
	tests := map[string]struct {
		before, filter, update string
		arrayFilters           []string
		want                   string
	}{
		"$set of a whole subdocument reports it whole": {`{"_id": 1, "a": {"b": 0, "c": 2}}`, `{}`, `{"$set": {"a": {"b": 1, "c": 2}}}`, nil,
			`{"updatedFields": {"a": {"b": 1, "c": 2}}, ` + noRemoved + `}`},
		"$set of a dotted path": {`{"_id": 1, "a": {"b": 0, "c": 2}}`, `{}`, `{"$set": {"a.b": 5}}`, nil,
			`{"updatedFields": {"a.b": 5}, ` + noRemoved + `}`},
		"$inc of a dotted path": {`{"_id": 1, "x": {"y": 1}}`, `{}`, `{"$inc": {"x.y": 1}}`, nil,
			`{"updatedFields": {"x.y": 2}, ` + noRemoved + `}`},
		"$inc creates a field": {`{"_id": 1}`, `{}`, `{"$inc": {"n": 1}}`, nil,
			`{"updatedFields": {"n": 1}, ` + noRemoved + `}`},
		"$set creates at the first missing component": {`{"_id": 1, "a": {"z": 0}}`, `{}`, `{"$set": {"a.b.c": 1}}`, nil,
			`{"updatedFields": {"a.b": {"c": 1}}, ` + noRemoved + `}`},
		"$set creating a top-level path": {`{"_id": 1}`, `{}`, `{"$set": {"a.b.c": 1}}`, nil,
			`{"updatedFields": {"a": {"b": {"c": 1}}}, ` + noRemoved + `}`},
		"updates come before inserts": {`{"_id": 1, "z": 1}`, `{}`, `{"$set": {"a": 1, "z": 2}}`, nil,
			`{"updatedFields": {"z": 2, "a": 1}, ` + noRemoved + `}`},
		"operators apply in field order": {`{"_id": 1, "a": 0, "b": 0}`, `{}`, `{"$set": {"b": 1}, "$inc": {"a": 1}}`, nil,
			`{"updatedFields": {"a": 1, "b": 1}, ` + noRemoved + `}`},
		"$set to the current value changes nothing": {`{"_id": 1, "a": {"b": 1}}`, `{}`, `{"$set": {"a.b": 1}}`, nil, none},
		"$set of an unchanged path next to a changed one": {`{"_id": 1, "a": 1, "b": 1}`, `{}`, `{"$set": {"a": 1, "b": 2}}`, nil,
			`{"updatedFields": {"b": 2}, ` + noRemoved + `}`},
		"$unset": {`{"_id": 1, "x": 1, "y": 2}`, `{}`, `{"$unset": {"x": 1}}`, nil,
			`{"updatedFields": {}, "removedFields": ["x"], "truncatedArrays": []}`},
		"$unset of a missing field is not reported": {`{"_id": 1, "y": 2}`, `{}`, `{"$unset": {"x": 1}, "$set": {"y": 3}}`, nil,
			`{"updatedFields": {"y": 3}, ` + noRemoved + `}`},
		"$unset of a missing field changes nothing": {`{"_id": 1, "y": 2}`, `{}`, `{"$unset": {"x": 1}}`, nil, none},
		"$unset of a nested field": {`{"_id": 1, "a": {"b": 1, "c": 1}}`, `{}`, `{"$unset": {"a.b": 1}}`, nil,
			`{"updatedFields": {}, "removedFields": ["a.b"], "truncatedArrays": []}`},
		"$unset of an array element nulls it": {`{"_id": 1, "arr": [0, 1, 2]}`, `{}`, `{"$unset": {"arr.1": 1}}`, nil,
			`{"updatedFields": {"arr.1": null}, ` + noRemoved + `}`},
		"$push appends one element": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$push": {"arr": 3}}`, nil,
			`{"updatedFields": {"arr.2": 3}, ` + noRemoved + `}`},
		"$push $each appends each element": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$push": {"arr": {"$each": [3, 4]}}}`, nil,
			`{"updatedFields": {"arr.2": 3, "arr.3": 4}, ` + noRemoved + `}`},
		"$push onto an empty array reports it whole": {`{"_id": 1, "arr": []}`, `{}`, `{"$push": {"arr": 1}}`, nil,
			`{"updatedFields": {"arr": [1]}, ` + noRemoved + `}`},
		"$push creates the array": {`{"_id": 1}`, `{}`, `{"$push": {"arr": 1}}`, nil,
			`{"updatedFields": {"arr": [1]}, ` + noRemoved + `}`},
		"$push at a position reports the array whole": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$push": {"arr": {"$each": [0], "$position": 0}}}`, nil,
			`{"updatedFields": {"arr": [0, 1, 2]}, ` + noRemoved + `}`},
		"$push past the end appends": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$push": {"arr": {"$each": [3], "$position": 5}}}`, nil,
			`{"updatedFields": {"arr.2": 3}, ` + noRemoved + `}`},
		"$push with $slice cutting reports the array whole": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$push": {"arr": {"$each": [3], "$slice": -2}}}`, nil,
			`{"updatedFields": {"arr": [2, 3]}, ` + noRemoved + `}`},
		"$push with $sort reports the array whole": {`{"_id": 1, "arr": [1, 3]}`, `{}`, `{"$push": {"arr": {"$each": [4], "$sort": 1}}}`, nil,
			`{"updatedFields": {"arr": [1, 3, 4]}, ` + noRemoved + `}`},
		"$pop of the last element reports the array whole": {`{"_id": 1, "arr": [1, 2, 3]}`, `{}`, `{"$pop": {"arr": 1}}`, nil,
			`{"updatedFields": {"arr": [1, 2]}, ` + noRemoved + `}`},
		"$pop of the first element reports the array whole": {`{"_id": 1, "arr": [1, 2, 3]}`, `{}`, `{"$pop": {"arr": -1}}`, nil,
			`{"updatedFields": {"arr": [2, 3]}, ` + noRemoved + `}`},
		"$pop of an empty array changes nothing": {`{"_id": 1, "arr": []}`, `{}`, `{"$pop": {"arr": 1}}`, nil, none},
		"$pull reports the array whole": {`{"_id": 1, "arr": [1, 2, 3]}`, `{}`, `{"$pull": {"arr": 2}}`, nil,
			`{"updatedFields": {"arr": [1, 3]}, ` + noRemoved + `}`},
		"$pullAll reports the array whole": {`{"_id": 1, "arr": [1, 2, 3, 1]}`, `{}`, `{"$pullAll": {"arr": [1, 3]}}`, nil,
			`{"updatedFields": {"arr": [2]}, ` + noRemoved + `}`},
		"$addToSet reports the array whole": {`{"_id": 1, "arr": [0]}`, `{}`, `{"$addToSet": {"arr": 1}}`, nil,
			`{"updatedFields": {"arr": [0, 1]}, ` + noRemoved + `}`},
		"$addToSet of a present value changes nothing": {`{"_id": 1, "arr": [0]}`, `{}`, `{"$addToSet": {"arr": 0}}`, nil, none},
		"$set of an array element": {`{"_id": 1, "arr": [1, 2]}`, `{}`, `{"$set": {"arr.1": 5}}`, nil,
			`{"updatedFields": {"arr.1": 5}, ` + noRemoved + `}`},
		"$set inside an array element": {`{"_id": 1, "arr": [{"f": 1}, {"f": 2}]}`, `{}`, `{"$set": {"arr.1.f": 5}}`, nil,
			`{"updatedFields": {"arr.1.f": 5}, ` + noRemoved + `}`},
		"positional $ resolves to the matched element": {`{"_id": 1, "arr": [1, 2, 3]}`, `{"arr": 2}`, `{"$set": {"arr.$": 9}}`, nil,
			`{"updatedFields": {"arr.1": 9}, ` + noRemoved + `}`},
		"positional $ inside the matched element": {`{"_id": 1, "arr": [{"k": 1, "f": 0}, {"k": 2, "f": 0}]}`, `{"arr.k": 2}`, `{"$inc": {"arr.$.f": 1}}`, nil,
			`{"updatedFields": {"arr.1.f": 1}, ` + noRemoved + `}`},
		"$[] over one element logs the element's path": {`{"_id": 1, "arr": [{"f": 1}]}`, `{}`, `{"$set": {"arr.$[].f": 2}}`, nil,
			`{"updatedFields": {"arr.0.f": 2}, ` + noRemoved + `}`},
		"$[] modifying several elements reports the array whole": {`{"_id": 1, "arr": [{"f": 1}, {"f": 2}]}`, `{}`, `{"$set": {"arr.$[].f": 0}}`, nil,
			`{"updatedFields": {"arr": [{"f": 0}, {"f": 0}]}, ` + noRemoved + `}`},
		"$[] modifying one of several reports that element whole": {`{"_id": 1, "arr": [{"f": 0}, {"f": 2}]}`, `{}`, `{"$set": {"arr.$[].f": 0}}`, nil,
			`{"updatedFields": {"arr.1": {"f": 0}}, ` + noRemoved + `}`},
		"$[id] matching several, modifying one": {`{"_id": 1, "arr": [{"c": 0, "b": 0}, {"c": 0}, {"c": 1}]}`, `{}`, `{"$set": {"arr.$[i].b": 0}}`, []string{`{"i.c": 0}`},
			`{"updatedFields": {"arr.1": {"c": 0, "b": 0}}, ` + noRemoved + `}`},
		"$[id] matching one logs the element's path": {`{"_id": 1, "arr": [{"c": 0}, {"c": 1}]}`, `{}`, `{"$set": {"arr.$[i].b": 7}}`, []string{`{"i.c": 1}`},
			`{"updatedFields": {"arr.1.b": 7}, ` + noRemoved + `}`},
		"$[id] on scalars": {`{"_id": 1, "arr": [0, 1, 0]}`, `{}`, `{"$set": {"arr.$[i]": 2}}`, []string{`{"i": 0}`},
			`{"updatedFields": {"arr": [2, 1, 2]}, ` + noRemoved + `}`},
		"$rename": {`{"_id": 1, "a": 1}`, `{}`, `{"$rename": {"a": "b"}}`, nil,
			`{"updatedFields": {"b": 1}, "removedFields": ["a"], "truncatedArrays": []}`},
		"$rename removes the source in the destination's turn": {`{"_id": 1, "a": 1, "c": 1}`, `{}`, `{"$rename": {"a": "d"}, "$unset": {"c": 1}}`, nil,
			`{"updatedFields": {"d": 1}, "removedFields": ["c", "a"], "truncatedArrays": []}`},
		"$rename onto an existing field": {`{"_id": 1, "a": 1, "b": 2}`, `{}`, `{"$rename": {"a": "b"}}`, nil,
			`{"updatedFields": {"b": 1}, "removedFields": ["a"], "truncatedArrays": []}`},
		"$rename of a missing field changes nothing": {`{"_id": 1, "a": 1}`, `{}`, `{"$rename": {"x": "b"}}`, nil, none},
		"$max that raises": {`{"_id": 1, "n": 1}`, `{}`, `{"$max": {"n": 5}}`, nil,
			`{"updatedFields": {"n": 5}, ` + noRemoved + `}`},
		"$max that does not raise changes nothing": {`{"_id": 1, "n": 9}`, `{}`, `{"$max": {"n": 5}}`, nil, none},
		"$min and $mul": {`{"_id": 1, "m": 3, "n": 2}`, `{}`, `{"$min": {"m": 1}, "$mul": {"n": 3}}`, nil,
			`{"updatedFields": {"m": 1, "n": 6}, ` + noRemoved + `}`},
		"a numeric field name in a document is disambiguated": {`{"_id": 1, "a": {"x": 1}}`, `{}`, `{"$set": {"a.0": 1}}`, nil,
			`{"updatedFields": {"a.0": 1}, ` + noRemoved + `, "disambiguatedPaths": {"a.0": ["a", "0"]}}`},
		"a numeric top-level field is not ambiguous": {`{"_id": 1}`, `{}`, `{"$set": {"1": 5}}`, nil,
			`{"updatedFields": {"1": 5}, ` + noRemoved + `}`},
		"an array index is not ambiguous": {`{"_id": 1, "a": [{"x": 1}]}`, `{}`, `{"$set": {"a.0.x": 2}}`, nil,
			`{"updatedFields": {"a.0.x": 2}, ` + noRemoved + `}`},
		"a numeric field below an array index": {`{"_id": 1, "a": [{"1": 0}]}`, `{}`, `{"$set": {"a.0.1": 9}}`, nil,
			`{"updatedFields": {"a.0.1": 9}, ` + noRemoved + `, "disambiguatedPaths": {"a.0.1": ["a", 0, "1"]}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			es := updateEntry(t, tc.before, tc.filter, tc.update, tc.arrayFilters...)
			if tc.want == none {
				if len(es) != 0 {
					t.Fatalf("got %d entries (%s %+v), want none", len(es), es[0].Op, es[0].Update)
				}
				return
			}
			if len(es) != 1 || es[0].Op != "update" || es[0].Update == nil {
				t.Fatalf("got %+v, want one update entry", es)
			}
			if got, want := describe(t, es[0].Update), js(t, tc.want).String(); got != want {
				t.Errorf("got  %s\nwant %s\nafter %s", got, want, es[0].Doc)
			}
		})
	}
}

// TestPipelineUpdateDescription checks that a pipeline-style update is
// described by a document diff when the diff is smaller than the document,
// and is a replacement otherwise, as MongoDB logs it.
func TestPipelineUpdateDescription(t *testing.T) {
	big := strings.Repeat("x", 200)
	tests := map[string]struct {
		before, update string
		op, want       string
	}{
		"the change-streams spec's array truncation": {`{"_id": 1, "a": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`, `[{"$set": {"array": ["foo", {"a": "bar"}]}}]`, "update",
			`{"updatedFields": {}, "removedFields": [], "truncatedArrays": [{"f": "array", "n": 2}]}`},
		"a small document is replaced": {`{"_id": 1, "a": 1}`, `[{"$set": {"a": 2}}]`, "replace", ""},
		"a field of a large document": {`{"_id": 1, "s": "` + big + `", "a": 1}`, `[{"$set": {"a": 2}}]`, "update",
			`{"updatedFields": {"a": 2}, "removedFields": [], "truncatedArrays": []}`},
		"inserts and deletes": {`{"_id": 1, "s": "` + big + `", "a": 1}`, `[{"$unset": "a"}, {"$set": {"n": true}}]`, "update",
			`{"updatedFields": {"n": true}, "removedFields": ["a"], "truncatedArrays": []}`},
		"inside a large subdocument": {`{"_id": 1, "d": {"s": "` + big + `", "a": 1}}`, `[{"$set": {"d.a": 2}}]`, "update",
			`{"updatedFields": {"d.a": 2}, "removedFields": [], "truncatedArrays": []}`},
		"a small subdocument is reported whole": {`{"_id": 1, "s": "` + big + `", "d": {"a": 1, "b": 1}}`, `[{"$set": {"d.a": 2}}]`, "update",
			`{"updatedFields": {"d": {"a": 2, "b": 1}}, "removedFields": [], "truncatedArrays": []}`},
		"a truncated array": {`{"_id": 1, "s": "` + big + `", "arr": ["` + big + `", 2, 3]}`, `[{"$set": {"arr": {"$slice": ["$arr", 1]}}}]`, "update",
			`{"updatedFields": {}, "removedFields": [], "truncatedArrays": [{"f": "arr", "n": 1}]}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			es := updateEntry(t, tc.before, `{}`, tc.update)
			if len(es) != 1 || es[0].Op != tc.op {
				t.Fatalf("got %+v, want one %s entry", es, tc.op)
			}
			switch {
			case tc.want == "" && es[0].Update != nil:
				t.Errorf("replacement with a description %+v", es[0].Update)
			case tc.want != "" && (es[0].Update == nil || describe(t, es[0].Update) != js(t, tc.want).String()):
				t.Errorf("got  %+v\nwant %s", es[0].Update, tc.want)
			}
		})
	}
}

func TestCompareComponents(t *testing.T) {
	got := []string{"b", "10", "a", "9", "$", "010", "B"}
	want := "$ 9 010 10 B a b"
	slices.SortFunc(got, compareComponents)
	if s := strings.Join(got, " "); s != want {
		t.Errorf("got %s, want %s", s, want)
	}
}

// genUpdate draws a modifier-style update over a few paths of the
// documents genTree draws, with array filters for $[e].
func genUpdate(t *rapid.T) (bson.D, []bson.Raw) {
	paths := []string{"a", "b", "n", "1", "a.a", "a.b", "a.n", "a.0", "b.0", "b.1", "b.4", "b.$[]", "b.$[].a", "a.$[]", "b.$[e]", "b.$[e].b"}
	value := func(string) any { return genLeaf(t, 1) }
	number := func(label string) any { return int32(rapid.IntRange(-2, 3).Draw(t, label)) }
	ops := map[string]func() any{
		"$set":   func() any { return value("set") },
		"$unset": func() any { return "" },
		"$inc":   func() any { return number("inc") },
		"$mul":   func() any { return number("mul") },
		"$max":   func() any { return number("max") },
		"$min":   func() any { return number("min") },
		"$pop":   func() any { return rapid.SampledFrom([]int32{1, -1}).Draw(t, "pop") },
		"$pull":  func() any { return value("pull") },
		"$pullAll": func() any {
			return bson.A{value("pullAll")}
		},
		"$addToSet": func() any { return value("addToSet") },
		"$push": func() any {
			if rapid.Bool().Draw(t, "plain push") {
				return value("push")
			}
			spec := bson.D{{Key: "$each", Value: bson.A{value("each"), number("each")}}}
			if rapid.Bool().Draw(t, "position") {
				spec = append(spec, bson.E{Key: "$position", Value: number("position")})
			}
			if rapid.Bool().Draw(t, "slice") {
				spec = append(spec, bson.E{Key: "$slice", Value: number("slice")})
			}
			return spec
		},
		"$rename": func() any { return rapid.SampledFrom([]string{"r", "a.r", "n"}).Draw(t, "rename to") },
	}
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	slices.Sort(names)
	var update bson.D
	var filters []bson.Raw
	for range rapid.IntRange(1, 3).Draw(t, "operators") {
		op := rapid.SampledFrom(names).Draw(t, "op")
		path := rapid.SampledFrom(paths).Draw(t, "path")
		if strings.Contains(path, "$[e]") && filters == nil {
			f, _ := bson.Marshal(bson.D{{Key: "e", Value: bson.D{{Key: "$gte", Value: int32(1)}}}})
			filters = []bson.Raw{f}
		}
		update = append(update, bson.E{Key: op, Value: bson.D{{Key: path, Value: ops[op]()}}})
	}
	return update, filters
}

// TestUpdateDescriptionReplays checks that replaying the description of any
// modifier-style update onto the document before it gives the document
// after it (fields compared in name order).
func TestUpdateDescriptionReplays(t *testing.T) {
	s := openMem(t)
	id, described := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		id++
		before := append(bson.D{{Key: "_id", Value: int32(id)}}, genTree(t, 0)...)
		braw := raw(t, before)
		if n, errs := s.Insert(nsA, []bson.Raw{braw}, true); n != 1 {
			t.Fatalf("insert %s: %v", braw, errs)
		}
		update, filters := genUpdate(t)
		start := s.Oplog().Newest()
		filter := raw(t, bson.D{{Key: "_id", Value: int32(id)}})
		if _, err := s.Update(nsA, UpdateSpec{Filter: filter, Update: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw(t, update)}, ArrayFilters: filters}); err != nil {
			return // an update MongoDB refuses too (a conflict, a type mismatch)
		}
		es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
		if len(es) == 0 {
			return
		}
		if len(es) != 1 || es[0].Op != "update" || es[0].Update == nil {
			t.Fatalf("update %v gave %+v", update, es)
		}
		u := es[0].Update
		if len(u.UpdatedFields)+len(u.RemovedFields)+len(u.TruncatedArrays) == 0 {
			t.Fatalf("update %v changed %s into %s with an empty description", update, braw, es[0].Doc)
		}
		checkReplay(t, braw, es[0].Doc, u)
		described++
	})
	t.Logf("%d of %d updates described", described, id)
	if described < id/10 {
		t.Errorf("only %d of %d updates were described: the generator makes too few valid updates", described, id)
	}
}
