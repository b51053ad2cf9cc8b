package mql

import (
	"testing"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestProjectionApply(t *testing.T) {
	t.Parallel()
	in := `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, 5], "n": [1, 2, 3, 4, 5]}`
	tests := map[string]struct {
		proj string
		doc  string
		pos  int
		want string
	}{
		"empty":             {proj: `{}`, want: in},
		"include":           {proj: `{"a": 1}`, want: `{"_id": 1, "a": 1}`},
		"include no id":     {proj: `{"a": 1, "_id": 0}`, want: `{"a": 1}`},
		"include true":      {proj: `{"a": true}`, want: `{"_id": 1, "a": 1}`},
		"id only":           {proj: `{"_id": 1}`, want: `{"_id": 1}`},
		"no id only":        {proj: `{"_id": 0}`, want: `{"a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, 5], "n": [1, 2, 3, 4, 5]}`},
		"exclude":           {proj: `{"b": 0, "arr": 0, "n": 0}`, want: `{"_id": 1, "a": 1}`},
		"include dotted":    {proj: `{"b.c": 1}`, want: `{"_id": 1, "b": {"c": 2}}`},
		"include nested":    {proj: `{"b": {"c": 1}}`, want: `{"_id": 1, "b": {"c": 2}}`},
		"exclude dotted":    {proj: `{"b.c": 0, "arr": 0, "n": 0}`, want: `{"_id": 1, "a": 1, "b": {"d": 3}}`},
		"include in array":  {proj: `{"arr.x": 1}`, want: `{"_id": 1, "arr": [{"x": 1}, {"x": 2}]}`},
		"exclude in array":  {proj: `{"arr.x": 0, "b": 0, "n": 0}`, want: `{"_id": 1, "a": 1, "arr": [{"y": 1}, {"y": 2}, 5]}`},
		"doc order kept":    {proj: `{"b": 1, "a": 1}`, want: `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}}`},
		"slice":             {proj: `{"n": {"$slice": 2}}`, want: `{"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, 5], "n": [1, 2]}`},
		"slice negative":    {proj: `{"n": {"$slice": -2}, "a": 1}`, want: `{"_id": 1, "a": 1, "n": [4, 5]}`},
		"slice skip limit":  {proj: `{"n": {"$slice": [1, 2]}, "a": 1}`, want: `{"_id": 1, "a": 1, "n": [2, 3]}`},
		"slice neg skip":    {proj: `{"n": {"$slice": [-2, 5]}, "_id": 0, "a": 1}`, want: `{"a": 1, "n": [4, 5]}`},
		"elemMatch":         {proj: `{"arr": {"$elemMatch": {"x": 2}}}`, want: `{"_id": 1, "arr": [{"x": 2, "y": 2}]}`},
		"elemMatch none":    {proj: `{"arr": {"$elemMatch": {"x": 9}}}`, want: `{"_id": 1}`},
		"elemMatch value":   {proj: `{"n": {"$elemMatch": {"$gt": 3}}}`, want: `{"_id": 1, "n": [4]}`},
		"positional":        {proj: `{"n.$": 1}`, pos: 2, want: `{"_id": 1, "n": [3]}`},
		"computed":          {proj: `{"x": "$a", "a": 1}`, want: `{"_id": 1, "a": 1, "x": 1}`},
		"computed literal":  {proj: `{"x": {"$literal": 1}, "_id": 0}`, want: `{"x": 1}`},
		"computed nested":   {proj: `{"b": {"e": {"$add": ["$b.c", 1]}}}`, want: `{"_id": 1, "b": {"e": 3}}`},
		"missing included":  {proj: `{"zz": 1}`, want: `{"_id": 1}`},
		"scalar in include": {proj: `{"a.x": 1}`, want: `{"_id": 1}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := CompileProjection(doc(t, tc.proj))
			if err != nil {
				t.Fatalf("compile %s: %v", tc.proj, err)
			}
			d := in
			if tc.doc != "" {
				d = tc.doc
			}
			got, err := p.Apply(doc(t, d), tc.pos)
			if err != nil {
				t.Fatal(err)
			}
			sameDoc(t, got, tc.want)
		})
	}
}

func TestProjectionErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		proj string
		code int32
		msg  string
	}{
		"exclusion in inclusion": {`{"a": 1, "b": 0}`, mongoerr.Location31254, "Cannot do exclusion on field b in inclusion projection"},
		"inclusion in exclusion": {`{"a": 0, "b": 1}`, 31253, "Cannot do inclusion on field b in exclusion projection"},
		"path collision":         {`{"a": 1, "a.b": 1}`, 31250, "Path collision at a.b remaining portion b"},
		"bad slice":              {`{"a": {"$slice": "x"}}`, 28667, ""},
		"unknown expression":     {`{"a": {"$foo": 1}}`, mongoerr.InvalidPipelineOperator, "Unrecognized expression '$foo'"},
		"two positional":         {`{"a.$": 1, "b.$": 1}`, 31276, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileProjection(doc(t, tc.proj))
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestPositionalProjectionNeedsMatch(t *testing.T) {
	t.Parallel()
	p, err := CompileProjection(doc(t, `{"a.$": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Apply(doc(t, `{"a": [1, 2]}`), -1)
	wantCode(t, err, 51246, "")
}

func TestSort(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		sort string
		in   []string
		want []string
	}{
		"asc": {`{"a": 1}`, []string{`{"a": 2}`, `{"a": 1}`, `{"a": 3}`}, []string{`{"a": 1}`, `{"a": 2}`, `{"a": 3}`}},
		"desc": {`{"a": -1}`, []string{`{"a": 2}`, `{"a": 1}`, `{"a": 3}`},
			[]string{`{"a": 3}`, `{"a": 2}`, `{"a": 1}`}},
		"missing as null": {`{"a": 1}`, []string{`{"a": 1}`, `{"b": 1}`, `{"a": null}`},
			[]string{`{"b": 1}`, `{"a": null}`, `{"a": 1}`}},
		"types": {`{"a": 1}`, []string{`{"a": "s"}`, `{"a": {"x": 1}}`, `{"a": 1.5}`, `{"a": true}`, `{"a": null}`},
			[]string{`{"a": null}`, `{"a": 1.5}`, `{"a": "s"}`, `{"a": {"x": 1}}`, `{"a": true}`}},
		"array asc min": {`{"a": 1}`, []string{`{"a": [5, 0]}`, `{"a": 3}`},
			[]string{`{"a": [5, 0]}`, `{"a": 3}`}},
		"array desc max": {`{"a": -1}`, []string{`{"a": 3}`, `{"a": [5, 0]}`},
			[]string{`{"a": [5, 0]}`, `{"a": 3}`}},
		"empty array first": {`{"a": 1}`, []string{`{"a": null}`, `{"a": []}`},
			[]string{`{"a": []}`, `{"a": null}`}},
		"compound": {`{"a": 1, "b": -1}`, []string{`{"a": 1, "b": 1}`, `{"a": 0, "b": 0}`, `{"a": 1, "b": 2}`},
			[]string{`{"a": 0, "b": 0}`, `{"a": 1, "b": 2}`, `{"a": 1, "b": 1}`}},
		"dotted": {`{"a.b": 1}`, []string{`{"a": {"b": 2}}`, `{"a": [{"b": 3}, {"b": 1}]}`},
			[]string{`{"a": [{"b": 3}, {"b": 1}]}`, `{"a": {"b": 2}}`}},
		"stable": {`{"a": 1}`, []string{`{"a": 1, "i": 0}`, `{"a": 0}`, `{"a": 1, "i": 1}`, `{"a": 1, "i": 2}`},
			[]string{`{"a": 0}`, `{"a": 1, "i": 0}`, `{"a": 1, "i": 1}`, `{"a": 1, "i": 2}`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileSort(doc(t, tc.sort))
			if err != nil {
				t.Fatal(err)
			}
			ds := docs(t, tc.in...)
			s.SortDocs(ds)
			for i, w := range tc.want {
				sameDoc(t, ds[i], w)
			}
		})
	}
}

func TestSortErrors(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]string{"zero": `{"a": 0}`, "two": `{"a": 2}`} {
		t.Run(name, func(t *testing.T) {
			_, err := CompileSort(doc(t, spec))
			wantCode(t, err, 15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		})
	}
	_, err := CompileSort(doc(t, `{"a": "x"}`))
	wantCode(t, err, 15974, "")
}
