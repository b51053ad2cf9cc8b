package store

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPipelineUpdatesAsMongoDB replays the sequence of MongoDB's change
// stream test of pipeline-style updates (jstests/change_streams/
// pipeline_style_updates.js) and checks each description against the
// events MongoDB gives, compared without regard to order except where
// noted.
func TestPipelineUpdatesAsMongoDB(t *testing.T) {
	giant, medium, small := strings.Repeat("*", 1024), strings.Repeat("*", 128), strings.Repeat("*", 32)
	q := func(s string) string { return `"` + s + `"` }
	s := openMem(t)
	seed(t, s, `{"_id": 100, "a": 1, "b": 2, "arrayForSubdiff": [`+q(giant)+`, {"a": `+q(medium)+`}, 1, 2, 3], "arrayForReplacement": [0, 1, 2, 3], "giantStr": `+q(giant)+`}`)
	steps := []struct {
		name, pipeline string
		updated        map[string]string
		removed        []string
		truncated      string
		removedInOrder bool
	}{
		{"$set", `[{"$set": {"a": 2, "arrayForSubdiff": [` + q(giant) + `, {"a": ` + q(medium) + `, "b": 3}], "arrayForReplacement": [0], "c": 3}}]`,
			map[string]string{"a": `2`, "c": `3`, "arrayForReplacement": `[0]`, "arrayForSubdiff.1.b": `3`}, nil, `[{"f": "arrayForSubdiff", "n": 2}]`, false},
		{"$unset", `[{"$unset": ["a"]}]`, map[string]string{}, []string{"a"}, `[]`, false},
		{"$replaceRoot", `[{"$replaceRoot": {"newRoot": {"_id": 100, "giantStr": ` + q(giant) + `}}}]`,
			map[string]string{}, []string{"c", "arrayForReplacement", "arrayForSubdiff", "b"}, `[]`, true},
		{"complex pipeline", `[{"$replaceRoot": {"newRoot": {"_id": 100, "giantStr": ` + q(giant) + `,
			"arr": [{"x": 1, "y": ` + q(small) + `}, ` + q(medium) + `], "arr_a": [1, ` + q(medium) + `],
			"arr_b": [[1, ` + q(small) + `], ` + q(medium) + `], "arr_c": [[` + q(small) + `, 1, 2, 3], ` + q(medium) + `],
			"obj": {"x": {"a": 1, "b": 1, "c": [` + q(medium) + `, 1, 2, 3], "str": ` + q(medium) + `}}}}},
			{"$addFields": {"a": "updated", "b": 2, "doc": {"a": {"0": "foo"}}}},
			{"$project": {"a": true, "giantStr": true, "doc": true, "arr": true, "arr_a": true, "arr_b": true, "arr_c": true, "obj": true}}]`,
			map[string]string{"a": `"updated"`, "doc": `{"a": {"0": "foo"}}`, "arr": `[{"x": 1, "y": ` + q(small) + `}, ` + q(medium) + `]`,
				"arr_a": `[1, ` + q(medium) + `]`, "arr_b": `[[1, ` + q(small) + `], ` + q(medium) + `]`, "arr_c": `[[` + q(small) + `, 1, 2, 3], ` + q(medium) + `]`,
				"obj": `{"x": {"a": 1, "b": 1, "c": [` + q(medium) + `, 1, 2, 3], "str": ` + q(medium) + `}}`}, nil, `[]`, false},
		{"nested modifications", `[{"$replaceRoot": {"newRoot": {"_id": 100, "giantStr": ` + q(giant) + `,
			"arr": [{"y": ` + q(small) + `}, ` + q(medium) + `], "arr_a": [2, ` + q(medium) + `], "arr_b": [[2, ` + q(small) + `], ` + q(medium) + `],
			"arr_c": [[` + q(small) + `], ` + q(medium) + `], "obj": {"x": {"b": 2, "c": [` + q(medium) + `], "str": ` + q(medium) + `}}}}}]`,
			map[string]string{"arr_a.0": `2`, "arr_b.0.0": `2`, "obj.x.b": `2`}, []string{"a", "doc", "arr.0.x", "obj.x.a"},
			`[{"f": "arr_c.0", "n": 1}, {"f": "obj.x.c", "n": 1}]`, false},
	}
	for _, st := range steps {
		start := s.Oplog().Newest()
		if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"_id": 100}`), Update: jsv(t, st.pipeline)}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
		if len(es) != 1 || es[0].Op != "update" || es[0].Update == nil {
			t.Fatalf("%s: got %+v, want one update", st.name, es)
		}
		u := es[0].Update
		got := map[string]string{}
		for _, e := range u.UpdatedFields {
			got[e.Key] = bson.Raw(raw(t, bson.D{{Key: "v", Value: e.Value}})).String()
		}
		want := map[string]string{}
		for k, v := range st.updated {
			want[k] = js(t, `{"v": `+v+`}`).String()
		}
		if len(got) != len(want) {
			t.Errorf("%s: updatedFields %v, want %v", st.name, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: updatedFields[%s] = %.80s, want %.80s", st.name, k, got[k], v)
			}
		}
		removed := slices.Clone(u.RemovedFields)
		wantRemoved := slices.Clone(st.removed)
		if !st.removedInOrder {
			slices.Sort(removed)
			slices.Sort(wantRemoved)
		}
		if !slices.Equal(removed, wantRemoved) && len(removed)+len(wantRemoved) > 0 {
			t.Errorf("%s: removedFields %v, want %v", st.name, u.RemovedFields, st.removed)
		}
		if got, want := bson.Raw(raw(t, bson.D{{Key: "t", Value: truncatedDocs(u.TruncatedArrays)}})).String(), js(t, `{"t": `+st.truncated+`}`).String(); got != want {
			t.Errorf("%s: truncatedArrays %s, want %s", st.name, got, want)
		}
	}
}
