package mql

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// mapEnv is an honest in-memory Env.
type mapEnv map[string][]bson.Raw

func (m mapEnv) Collection(name string) ([]bson.Raw, error) { return m[name], nil }

func stages(t testing.TB, s string) []bson.Raw {
	t.Helper()
	v := val(t, s)
	var out []bson.Raw
	for _, e := range arrayValues(v.Value) {
		out = append(out, e.Value)
	}
	return out
}

func TestPipelineRun(t *testing.T) {
	t.Parallel()
	input := []string{
		`{"_id": 1, "cat": "a", "n": 1, "tags": ["x", "y"], "o": {"k": 1}}`,
		`{"_id": 2, "cat": "b", "n": 2, "tags": []}`,
		`{"_id": 3, "cat": "a", "n": 3.5, "tags": "z"}`,
		`{"_id": 4, "n": "str"}`,
	}
	env := mapEnv{"other": docs(t,
		`{"_id": 10, "ref": 1, "v": "one"}`,
		`{"_id": 11, "ref": 3, "v": "three"}`,
		`{"_id": 12, "ref": [1, 2], "v": "arr"}`,
		`{"_id": 13, "v": "noref"}`,
	)}
	tests := map[string]struct {
		pipeline string
		want     []string
	}{
		"match":       {`[{"$match": {"cat": "a"}}]`, []string{input[0], input[2]}},
		"project":     {`[{"$match": {"_id": 1}}, {"$project": {"n": 1, "k": "$o.k"}}]`, []string{`{"_id": 1, "n": 1, "k": 1}`}},
		"project exc": {`[{"$match": {"_id": 2}}, {"$project": {"tags": 0, "cat": 0}}]`, []string{`{"_id": 2, "n": 2}`}},
		"addFields": {`[{"$match": {"_id": 1}}, {"$addFields": {"m": {"$multiply": ["$n", 10]}, "o.j": 2}}]`,
			[]string{`{"_id": 1, "cat": "a", "n": 1, "tags": ["x", "y"], "o": {"k": 1, "j": 2}, "m": 10}`}},
		"set remove": {`[{"$match": {"_id": 2}}, {"$set": {"cat": "$$REMOVE"}}]`, []string{`{"_id": 2, "n": 2, "tags": []}`}},
		"unset":      {`[{"$match": {"_id": 2}}, {"$unset": ["tags", "cat"]}]`, []string{`{"_id": 2, "n": 2}`}},
		"sort limit skip": {`[{"$sort": {"_id": -1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}]`,
			[]string{`{"_id": 3}`, `{"_id": 2}`}},
		"count":       {`[{"$match": {"cat": "a"}}, {"$count": "total"}]`, []string{`{"total": 2}`}},
		"count empty": {`[{"$match": {"cat": "zz"}}, {"$count": "total"}]`, nil},
		"group": {`[{"$group": {"_id": "$cat", "sum": {"$sum": "$n"}, "avg": {"$avg": "$n"}, "c": {"$sum": 1}, "cnt": {"$count": {}}, "min": {"$min": "$n"}, "max": {"$max": "$n"}, "first": {"$first": "$_id"}, "last": {"$last": "$_id"}, "ids": {"$push": "$_id"}, "cats": {"$addToSet": "$cat"}}}, {"$sort": {"_id": 1}}]`,
			[]string{
				`{"_id": null, "sum": 0, "avg": null, "c": 1, "cnt": 1, "min": "str", "max": "str", "first": 4, "last": 4, "ids": [4], "cats": []}`,
				`{"_id": "a", "sum": 4.5, "avg": 2.25, "c": 2, "cnt": 2, "min": 1, "max": 3.5, "first": 1, "last": 3, "ids": [1, 3], "cats": ["a"]}`,
				`{"_id": "b", "sum": 2, "avg": 2.0, "c": 1, "cnt": 1, "min": 2, "max": 2, "first": 2, "last": 2, "ids": [2], "cats": ["b"]}`,
			}},
		"group numbers merge": {`[{"$project": {"k": {"$cond": [{"$eq": ["$_id", 1]}, 1, 1.0]}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}}}]`,
			[]string{`{"_id": 1, "n": 4}`}},
		"group doc id": {`[{"$match": {"cat": "a"}}, {"$group": {"_id": {"c": "$cat"}, "n": {"$sum": 1}}}]`, []string{`{"_id": {"c": "a"}, "n": 2}`}},
		"unwind": {`[{"$unwind": "$tags"}, {"$project": {"tags": 1}}]`,
			[]string{`{"_id": 1, "tags": "x"}`, `{"_id": 1, "tags": "y"}`, `{"_id": 3, "tags": "z"}`}},
		"unwind preserve": {`[{"$unwind": {"path": "$tags", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}}, {"$project": {"tags": 1, "i": 1}}]`,
			[]string{`{"_id": 1, "tags": "x", "i": {"$numberLong": "0"}}`, `{"_id": 1, "tags": "y", "i": {"$numberLong": "1"}}`, `{"_id": 2, "i": null}`, `{"_id": 3, "tags": "z", "i": null}`, `{"_id": 4, "i": null}`}},
		"replaceRoot": {`[{"$match": {"_id": 1}}, {"$replaceRoot": {"newRoot": "$o"}}]`, []string{`{"k": 1}`}},
		"replaceWith": {`[{"$match": {"_id": 1}}, {"$replaceWith": {"x": "$n"}}]`, []string{`{"x": 1}`}},
		"lookup": {`[{"$lookup": {"from": "other", "localField": "_id", "foreignField": "ref", "as": "j"}}, {"$project": {"j.v": 1}}]`,
			[]string{`{"_id": 1, "j": [{"v": "one"}, {"v": "arr"}]}`, `{"_id": 2, "j": [{"v": "arr"}]}`, `{"_id": 3, "j": [{"v": "three"}]}`, `{"_id": 4, "j": []}`}},
		"lookup missing local": {`[{"$match": {"_id": 4}}, {"$lookup": {"from": "other", "localField": "cat", "foreignField": "ref", "as": "j"}}, {"$project": {"j._id": 1}}]`,
			[]string{`{"_id": 4, "j": [{"_id": 13}]}`}},
		"lookup missing collection": {`[{"$match": {"_id": 4}}, {"$lookup": {"from": "none", "localField": "_id", "foreignField": "x", "as": "j"}}, {"$project": {"j": 1}}]`,
			[]string{`{"_id": 4, "j": []}`}},
		"lookup pipeline let": {`[{"$match": {"_id": {"$lte": 3}}}, {"$lookup": {"from": "other", "let": {"id": "$_id"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$ref", "$$id"]}}}, {"$project": {"_id": 0, "v": 1}}], "as": "j"}}, {"$project": {"j": 1}}]`,
			[]string{`{"_id": 1, "j": [{"v": "one"}]}`, `{"_id": 2, "j": []}`, `{"_id": 3, "j": [{"v": "three"}]}`}},
		"lookup pipeline only": {`[{"$match": {"_id": 1}}, {"$lookup": {"from": "other", "pipeline": [{"$count": "n"}], "as": "j"}}, {"$project": {"j": 1}}]`,
			[]string{`{"_id": 1, "j": [{"n": 4}]}`}},
		"lookup pipeline and fields": {`[{"$match": {"_id": 1}}, {"$lookup": {"from": "other", "localField": "_id", "foreignField": "ref", "pipeline": [{"$project": {"_id": 1}}], "as": "j"}}, {"$project": {"j": 1}}]`,
			[]string{`{"_id": 1, "j": [{"_id": 10}, {"_id": 12}]}`}},
		"unionWith": {`[{"$match": {"_id": 1}}, {"$project": {"_id": 1}}, {"$unionWith": {"coll": "other", "pipeline": [{"$match": {"ref": 3}}, {"$project": {"_id": 1}}]}}]`,
			[]string{`{"_id": 1}`, `{"_id": 11}`}},
		"facet": {`[{"$facet": {"a": [{"$match": {"cat": "a"}}, {"$count": "n"}], "ids": [{"$project": {"_id": 1}}, {"$limit": 1}]}}]`,
			[]string{`{"a": [{"n": 2}], "ids": [{"_id": 1}]}`}},
		"sortByCount": {`[{"$match": {"cat": {"$exists": true}}}, {"$sortByCount": "$cat"}]`, []string{`{"_id": "a", "count": 2}`, `{"_id": "b", "count": 1}`}},
		"countDocuments shape": {`[{"$match": {}}, {"$skip": 1}, {"$limit": 2}, {"$group": {"_id": 1, "n": {"$sum": 1}}}]`,
			[]string{`{"_id": 1, "n": 2}`}},
		"match expr": {`[{"$match": {"$expr": {"$eq": ["$n", 2]}}}, {"$project": {"_id": 1}}]`, []string{`{"_id": 2}`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := CompilePipeline(stages(t, tc.pipeline))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := p.Run(env, docs(t, input...))
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if len(got) != len(tc.want) {
				var b strings.Builder
				for _, g := range got {
					b.WriteString(g.String() + "\n")
				}
				t.Fatalf("got %d documents, want %d:\n%s", len(got), len(tc.want), b.String())
			}
			for i, w := range tc.want {
				sameDoc(t, got[i], w)
			}
		})
	}
}

func TestPipelineErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		pipeline string
		code     int32
		msg      string
	}{
		"unknown stage":        {`[{"$foo": {}}]`, mongoerr.Location40324, "Unrecognized pipeline stage name: '$foo'"},
		"unsupported stage":    {`[{"$out": "x"}]`, mongoerr.CommandNotSupported, "$out is not supported by this server"},
		"two fields":           {`[{"$match": {}, "$limit": 1}]`, 40323, ""},
		"project unknown":      {`[{"$project": {"a": {"$foo": 1}}}]`, mongoerr.InvalidPipelineOperator, "Invalid $project :: caused by :: Unrecognized expression '$foo'"},
		"project empty":        {`[{"$project": {}}]`, 51272, ""},
		"project mixed":        {`[{"$project": {"a": 1, "b": 0}}]`, mongoerr.Location31254, ""},
		"addFields unknown":    {`[{"$addFields": {"a": {"$foo": 1}}}]`, mongoerr.InvalidPipelineOperator, "Invalid $addFields :: caused by :: Unrecognized expression '$foo'"},
		"set dollar field":     {`[{"$set": {"$a": 1}}]`, mongoerr.Location16410, "Invalid $set :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField."},
		"addFields empty":      {`[{"$addFields": {}}]`, 40177, ""},
		"limit zero":           {`[{"$limit": 0}]`, 15958, "the limit must be positive"},
		"limit string":         {`[{"$limit": "x"}]`, 15957, ""},
		"skip negative":        {`[{"$skip": -1}]`, 15956, ""},
		"sort empty":           {`[{"$sort": {}}]`, 15976, ""},
		"count dollar":         {`[{"$count": "$x"}]`, 40158, ""},
		"count dot":            {`[{"$count": "a.b"}]`, 40160, ""},
		"group no id":          {`[{"$group": {"n": {"$sum": 1}}}]`, 15955, "a group specification must include an _id"},
		"group unknown acc":    {`[{"$group": {"_id": 1, "n": {"$foo": 1}}}]`, 15952, "unknown group operator '$foo'"},
		"group dotted":         {`[{"$group": {"_id": 1, "a.b": {"$sum": 1}}}]`, 40235, ""},
		"group not acc":        {`[{"$group": {"_id": 1, "n": 1}}]`, 40234, ""},
		"unwind no dollar":     {`[{"$unwind": "a"}]`, 28818, ""},
		"unwind bad option":    {`[{"$unwind": {"path": "$a", "x": 1}}]`, 28811, ""},
		"unwind type":          {`[{"$unwind": 1}]`, 15981, ""},
		"lookup bad pipeline":  {`[{"$lookup": {"from": "x", "pipeline": [{"$foo": 1}], "as": "y"}}]`, mongoerr.Location40324, ""},
		"lookup let no pipe":   {`[{"$lookup": {"from": "x", "let": {"a": 1}, "localField": "a", "foreignField": "b", "as": "y"}}]`, mongoerr.FailedToParse, ""},
		"lookup undefined var": {`[{"$lookup": {"from": "x", "pipeline": [{"$match": {"$expr": "$$nope"}}], "as": "y"}}]`, mongoerr.Location17276, ""},
		"lookup no as":         {`[{"$lookup": {"from": "x", "localField": "a", "foreignField": "b"}}]`, mongoerr.FailedToParse, ""},
		"facet nested":         {`[{"$facet": {"x": [{"$facet": {}}]}}]`, 40600, ""},
		"sortByCount literal":  {`[{"$sortByCount": "a"}]`, 40148, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompilePipeline(stages(t, tc.pipeline))
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestPipelineRuntimeErrors(t *testing.T) {
	t.Parallel()
	p, err := CompilePipeline(stages(t, `[{"$replaceRoot": {"newRoot": "$a"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(nil, docs(t, `{"_id": 1, "a": 1}`))
	wantCode(t, err, 40228, "")
	p, err = CompilePipeline(stages(t, `[{"$project": {"x": {"$divide": [1, "$z"]}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(nil, docs(t, `{"_id": 1, "z": 0}`))
	wantCode(t, err, mongoerr.BadValue, "can't $divide by zero")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	// {"a": 1} has its element at level 1; each wrapping adds a level.
	deep, limit := `{"a": 1}`, `{"a": 1}`
	for range 99 {
		limit = `{"a": ` + limit + `}`
	}
	deep = `{"a": ` + limit + `}`
	tests := map[string]struct {
		doc  string
		code int32
	}{
		"ok":               {`{"_id": 1, "a": {"b": [1, {"c": 2}]}}`, 0},
		"dollar field":     {`{"_id": 1, "$a": 1}`, 0},
		"dotted field":     {`{"_id": 1, "a.b": 1}`, 0},
		"id array":         {`{"_id": [1]}`, mongoerr.InvalidIdField},
		"id regex":         {`{"_id": {"$regularExpression": {"pattern": "x", "options": ""}}}`, mongoerr.InvalidIdField},
		"id undefined":     {`{"_id": {"$undefined": true}}`, mongoerr.InvalidIdField},
		"id dollar":        {`{"_id": {"$a": 1}}`, mongoerr.DollarPrefixedFieldName},
		"id nested dollar": {`{"_id": {"x": {"$a": 1}}}`, mongoerr.DollarPrefixedFieldName},
		"id dbref":         {`{"_id": {"$ref": "c", "$id": 1}}`, 0},
		"too deep":         {deep, mongoerr.Overflow},
		"deepest allowed":  {limit, 0},
		"id doc allowed":   {`{"_id": {"a": 1}}`, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := Validate(doc(t, tc.doc), 100)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantCode(t, err, tc.code, "")
		})
	}
	if err := Validate(bson.Raw{1, 2, 3}, 100); err == nil {
		t.Fatal("malformed BSON accepted")
	}
}
