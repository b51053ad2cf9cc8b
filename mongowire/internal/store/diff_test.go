package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"
)

// describe renders an UpdateDescription as a document for comparison.
func describe(t *testing.T, u *UpdateDescription) string {
	t.Helper()
	d := bson.D{
		{Key: "updatedFields", Value: u.UpdatedFields},
		{Key: "removedFields", Value: u.RemovedFields},
		{Key: "truncatedArrays", Value: truncatedDocs(u.TruncatedArrays)},
	}
	if u.DisambiguatedPaths != nil {
		d = append(d, bson.E{Key: "disambiguatedPaths", Value: u.DisambiguatedPaths})
	}
	return bson.Raw(raw(t, d)).String()
}

// js parses relaxed Extended JSON.
func js(t tb, s string) bson.Raw {
	t.Helper()
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return d
}

func TestDiff(t *testing.T) {
	const none = `"updatedFields": {}, "removedFields": [], "truncatedArrays": []`
	tests := map[string]struct {
		before, after, want string
	}{
		"nested set": {`{"_id": 1, "a": {"b": 0, "c": 1}}`, `{"_id": 1, "a": {"b": 1, "c": 1}}`,
			`{"updatedFields": {"a.b": 1}, "removedFields": [], "truncatedArrays": []}`},
		"unset": {`{"_id": 1, "x": 1, "y": 2}`, `{"_id": 1, "y": 2}`,
			`{"updatedFields": {}, "removedFields": ["x"], "truncatedArrays": []}`},
		"new field": {`{"_id": 1}`, `{"_id": 1, "n": "v"}`,
			`{"updatedFields": {"n": "v"}, "removedFields": [], "truncatedArrays": []}`},
		"push": {`{"_id": 1, "arr": [1, 2]}`, `{"_id": 1, "arr": [1, 2, 3]}`,
			`{"updatedFields": {"arr.2": 3}, "removedFields": [], "truncatedArrays": []}`},
		"pop": {`{"_id": 1, "arr": [1, 2]}`, `{"_id": 1, "arr": [1]}`,
			`{"updatedFields": {}, "removedFields": [], "truncatedArrays": [{"f": "arr", "n": 1}]}`},
		"truncate keeping a prefix": {`{"_id": 1, "array": ["foo", {"a": "bar"}, 1, 2, 3]}`, `{"_id": 1, "array": ["foo", {"a": "bar"}]}`,
			`{"updatedFields": {}, "removedFields": [], "truncatedArrays": [{"f": "array", "n": 2}]}`},
		"element inside an array": {`{"_id": 1, "arr": [{"x": 1}, {"x": 2}]}`, `{"_id": 1, "arr": [{"x": 1}, {"x": 5}]}`,
			`{"updatedFields": {"arr.1.x": 5}, "removedFields": [], "truncatedArrays": []}`},
		"every element changed": {`{"_id": 1, "arr": [1, 2]}`, `{"_id": 1, "arr": [3, 4]}`,
			`{"updatedFields": {"arr.0": 3, "arr.1": 4}, "removedFields": [], "truncatedArrays": []}`},
		"moved field is inserted": {`{"_id": 1, "a": 1, "b": 2}`, `{"_id": 1, "b": 2, "a": 1}`,
			`{"updatedFields": {"a": 1}, "removedFields": [], "truncatedArrays": []}`},
		"out-of-step fields are deleted in name order": {`{"_id": 1, "z": 1, "y": 1, "k": 1}`, `{"_id": 1, "k": 1}`,
			`{"updatedFields": {}, "removedFields": ["y", "z"], "truncatedArrays": []}`},
		"changes before inserts before deletes": {`{"_id": 1, "a": 1, "b": 1}`, `{"_id": 1, "b": 2, "n": 1}`,
			`{"updatedFields": {"b": 2, "n": 1}, "removedFields": ["a"], "truncatedArrays": []}`},
		"type change gives the top path": {`{"_id": 1, "a": {"b": 1}}`, `{"_id": 1, "a": "s"}`,
			`{"updatedFields": {"a": "s"}, "removedFields": [], "truncatedArrays": []}`},
		"int to double is a change": {`{"_id": 1, "n": 1}`, `{"_id": 1, "n": 1.5}`,
			`{"updatedFields": {"n": 1.5}, "removedFields": [], "truncatedArrays": []}`},
		"numeric field name is disambiguated": {`{"_id": 1, "a": [{"1": 0}]}`, `{"_id": 1, "a": [{"1": 9}]}`,
			`{"updatedFields": {"a.0.1": 9}, "removedFields": [], "truncatedArrays": [], "disambiguatedPaths": {"a.0.1": ["a", 0, "1"]}}`},
		"dotted field name is disambiguated": {`{"_id": 1, "a.b": 1}`, `{"_id": 1}`,
			`{"updatedFields": {}, "removedFields": ["a.b"], "truncatedArrays": [], "disambiguatedPaths": {"a.b": ["a.b"]}}`},
		"no change": {`{"_id": 1, "a": 1}`, `{"_id": 1, "a": 1}`, "{" + none + "}"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := describe(t, diffDocs(js(t, tc.before), js(t, tc.after)))
			if want := js(t, tc.want).String(); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestDiffSizeLimit checks that a diff not smaller than the value it
// describes gives way to the value, at every level, as in MongoDB.
func TestDiffSizeLimit(t *testing.T) {
	big := `"` + strings.Repeat("x", 100) + `"`
	tests := map[string]struct {
		before, after, want string
	}{
		"array of small changed elements is reported whole": {`{"_id": 1, "s": ` + big + `, "arr": [1, 2]}`, `{"_id": 1, "s": ` + big + `, "arr": [3, 4]}`,
			`{"updatedFields": {"arr": [3, 4]}, "removedFields": [], "truncatedArrays": []}`},
		"one change in a large array": {`{"_id": 1, "s": ` + big + `, "arr": [` + big + `, 2]}`, `{"_id": 1, "s": ` + big + `, "arr": [` + big + `, 5]}`,
			`{"updatedFields": {"arr.1": 5}, "removedFields": [], "truncatedArrays": []}`},
		"small subdocument is reported whole": {`{"_id": 1, "s": ` + big + `, "a": {"b": 0, "c": 1}}`, `{"_id": 1, "s": ` + big + `, "a": {"b": 1, "c": 1}}`,
			`{"updatedFields": {"a": {"b": 1, "c": 1}}, "removedFields": [], "truncatedArrays": []}`},
		"large subdocument is diffed": {`{"_id": 1, "a": {"s": ` + big + `, "c": 1}}`, `{"_id": 1, "a": {"s": ` + big + `, "c": 2}}`,
			`{"updatedFields": {"a.c": 2}, "removedFields": [], "truncatedArrays": []}`},
		"small document is not diffed": {`{"_id": 1, "a": 1}`, `{"_id": 1, "a": 2}`, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			u := pipelineDiff(js(t, tc.before), js(t, tc.after))
			switch {
			case tc.want == "" && u != nil:
				t.Errorf("got %s, want a replacement", describe(t, u))
			case tc.want == "":
			case u == nil:
				t.Errorf("got a replacement, want %s", tc.want)
			default:
				if got, want := describe(t, u), js(t, tc.want).String(); got != want {
					t.Errorf("got  %s\nwant %s", got, want)
				}
			}
		})
	}
}

// genTree draws a document with nested documents and arrays, using a
// numeric-looking and a dotted field name too.
func genTree(t *rapid.T, depth int) bson.D {
	d := bson.D{}
	for _, k := range []string{"a", "b", "1", "c.d"} {
		if rapid.IntRange(0, 2).Draw(t, "has "+k) > 0 {
			d = append(d, bson.E{Key: k, Value: genLeaf(t, depth)})
		}
	}
	return d
}

func genLeaf(t *rapid.T, depth int) any {
	kinds := []string{"int", "string"}
	if depth < 3 {
		kinds = append(kinds, "doc", "array")
	}
	switch rapid.SampledFrom(kinds).Draw(t, "kind") {
	case "int":
		return int32(rapid.IntRange(0, 3).Draw(t, "int"))
	case "string":
		return rapid.SampledFrom([]string{"x", "y"}).Draw(t, "string")
	case "doc":
		return genTree(t, depth+1)
	}
	a := bson.A{}
	for range rapid.IntRange(0, 3).Draw(t, "len") {
		a = append(a, genLeaf(t, depth+1))
	}
	return a
}

// mutate changes a tree the way updates do: set, unset, push, pop, and
// changes deeper down.
func mutate(t *rapid.T, v any, depth int) any {
	switch x := v.(type) {
	case bson.D:
		out := bson.D{}
		for _, e := range x {
			switch rapid.IntRange(0, 5).Draw(t, "field op") {
			case 0: // unset
			case 1:
				out = append(out, bson.E{Key: e.Key, Value: genLeaf(t, depth+1)})
			case 2, 3:
				out = append(out, bson.E{Key: e.Key, Value: mutate(t, e.Value, depth+1)})
			default:
				out = append(out, e)
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "add") == 0 && !slices.ContainsFunc(out, func(e bson.E) bool { return e.Key == "n" }) {
			out = append(out, bson.E{Key: "n", Value: genLeaf(t, depth+1)})
		}
		return out
	case bson.A:
		out := slices.Clone(x)
		for i := range out {
			if rapid.IntRange(0, 3).Draw(t, "elem op") == 0 {
				out[i] = mutate(t, out[i], depth+1)
			}
		}
		switch rapid.IntRange(0, 3).Draw(t, "array op") {
		case 0:
			out = out[:rapid.IntRange(0, len(out)).Draw(t, "truncate")]
		case 1:
			out = append(out, genLeaf(t, depth+1))
		}
		return out
	}
	if rapid.Bool().Draw(t, "change leaf") {
		return genLeaf(t, depth)
	}
	return v
}

// applyDescription replays an update description onto a document, as a
// change-stream consumer would, addressing paths by their components.
func applyDescription(t *rapid.T, doc bson.D, u *UpdateDescription) bson.D {
	comps := func(path string) []any {
		for _, e := range u.DisambiguatedPaths {
			if e.Key == path {
				return e.Value.(bson.A)
			}
		}
		var out []any
		for _, p := range strings.Split(path, ".") {
			out = append(out, p)
		}
		return out
	}
	var walk func(v any, path []any, fn func(parent any, last any) any) any
	walk = func(v any, path []any, fn func(parent any, last any) any) any {
		if len(path) == 1 {
			return fn(v, path[0])
		}
		switch x := v.(type) {
		case bson.D:
			for i := range x {
				if x[i].Key == fmt.Sprint(path[0]) {
					x[i].Value = walk(x[i].Value, path[1:], fn)
				}
			}
			return x
		case bson.A:
			i := arrayIndex(path[0])
			x[i] = walk(x[i], path[1:], fn)
			return x
		}
		t.Fatalf("path %v goes through %T", path, v)
		return nil
	}
	set := func(val any) func(parent, last any) any {
		return func(parent, last any) any {
			switch x := parent.(type) {
			case bson.D:
				for i := range x {
					if x[i].Key == fmt.Sprint(last) {
						x[i].Value = val
						return x
					}
				}
				return append(x, bson.E{Key: fmt.Sprint(last), Value: val})
			case bson.A:
				i := arrayIndex(last)
				for len(x) <= i {
					x = append(x, nil) // MongoDB pads an array set past its end with nulls
				}
				x[i] = val
				return x
			}
			t.Fatalf("set %v in %T", last, parent)
			return nil
		}
	}
	var v any = doc
	for _, tr := range u.TruncatedArrays {
		v = walk(v, append(comps(tr.Field), "$"), func(parent, _ any) any { return parent.(bson.A)[:tr.NewSize] })
	}
	for _, f := range u.RemovedFields {
		v = walk(v, comps(f), func(parent, last any) any {
			return slices.DeleteFunc(parent.(bson.D), func(e bson.E) bool { return e.Key == fmt.Sprint(last) })
		})
	}
	for _, f := range u.UpdatedFields {
		var val any
		rv := f.Value.(bson.RawValue)
		if err := rv.Unmarshal(&val); err != nil {
			t.Fatal(err)
		}
		v = walk(v, comps(f.Key), set(val))
	}
	return v.(bson.D)
}

func arrayIndex(c any) int {
	switch x := c.(type) {
	case int32:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return -1
}

// TestDiffReplays checks that replaying the description of any change onto
// the document before it gives the document after it.
func TestDiffReplays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fields := genTree(t, 0)
		id := bson.D{{Key: "_id", Value: 1}}
		before := append(id, fields...)
		after := append(id, mutate(t, fields, 0).(bson.D)...)
		braw, _ := bson.Marshal(before)
		araw, _ := bson.Marshal(after)
		descs := []*UpdateDescription{diffDocs(braw, araw)}
		if n := docDiff(braw, araw, 0, false); n != nil {
			descs = append(descs, n.describe())
		}
		for _, u := range descs {
			checkReplay(t, braw, araw, u)
		}
	})
}

// checkReplay fails unless replaying u onto before gives after. Fields are
// compared in name order: a field MongoDB's diff inserts moves to the end of
// its document, which updatedFields cannot tell a consumer.
func checkReplay(t *rapid.T, before, after bson.Raw, u *UpdateDescription) {
	var start bson.D
	if err := bson.Unmarshal(before, &start); err != nil {
		t.Fatal(err)
	}
	got := raw(t, applyDescription(t, start, u))
	if normalized(t, got) != normalized(t, after) {
		t.Fatalf("before %s\nafter  %s\nreplay %s\ndescription %+v", before, after, got, u)
	}
}

// normalized renders a document with the fields of every document sorted
// by name.
func normalized(t *rapid.T, doc bson.Raw) string {
	var d bson.D
	if err := bson.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var sortFields func(v any) any
	sortFields = func(v any) any {
		switch x := v.(type) {
		case bson.D:
			out := slices.Clone(x)
			for i := range out {
				out[i].Value = sortFields(out[i].Value)
			}
			slices.SortFunc(out, func(a, b bson.E) int { return strings.Compare(a.Key, b.Key) })
			return out
		case bson.A:
			out := slices.Clone(x)
			for i := range out {
				out[i] = sortFields(out[i])
			}
			return out
		}
		return v
	}
	return bson.Raw(raw(t, sortFields(d))).String()
}
