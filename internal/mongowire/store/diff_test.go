package store

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
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
func js(t testing.TB, s string) bson.Raw {
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
			`{"updatedFields": {"arr": [3, 4]}, "removedFields": [], "truncatedArrays": []}`},
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
