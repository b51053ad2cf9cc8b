package mql

import (
	"testing"
)

// runPipeline compiles and runs a pipeline over input, returning the
// output as extended JSON documents.
func runPipeline(t *testing.T, pipeline string, input []string) ([]string, error) {
	t.Helper()
	p, err := CompilePipeline(stages(t, pipeline))
	if err != nil {
		return nil, err
	}
	out, err := p.Run(nil, docs(t, input...))
	if err != nil {
		return nil, err
	}
	var got []string
	for _, d := range out {
		got = append(got, d.String())
	}
	return got, nil
}

func wantDocs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d documents %v, want %d %v", len(got), got, len(want), want)
	}
	for i, w := range want {
		if wd := doc(t, w).String(); got[i] != wd {
			t.Fatalf("document %d:\ngot  %s\nwant %s", i, got[i], wd)
		}
	}
}

// Expected answers follow the MongoDB 7.0 manual pages of each operator
// and mongod's accumulator_multi.cpp (ties, null handling, result order).
func TestNAccumulators(t *testing.T) {
	t.Parallel()
	input := []string{
		`{"_id": 1, "g": "a", "s": 3, "v": "x"}`,
		`{"_id": 2, "g": "a", "s": 1, "v": "y"}`,
		`{"_id": 3, "g": "a", "s": 2}`,
		`{"_id": 4, "g": "a", "s": 1, "v": null}`,
		`{"_id": 5, "g": "b", "s": 7, "v": "z"}`,
	}
	tests := map[string]struct {
		acc  string
		want []string // per group a, b
	}{
		"firstN":          {`{"$firstN": {"n": 2, "input": "$v"}}`, []string{`["x", "y"]`, `["z"]`}},
		"firstN missing":  {`{"$firstN": {"n": 3, "input": "$v"}}`, []string{`["x", "y", null]`, `["z"]`}},
		"lastN":           {`{"$lastN": {"n": 2, "input": "$v"}}`, []string{`[null, null]`, `["z"]`}},
		"maxN":            {`{"$maxN": {"n": 2, "input": "$s"}}`, []string{`[3, 2]`, `[7]`}},
		"minN":            {`{"$minN": {"n": 3, "input": "$s"}}`, []string{`[1, 1, 2]`, `[7]`}},
		"minN skips null": {`{"$minN": {"n": 5, "input": "$v"}}`, []string{`["x", "y"]`, `["z"]`}},
		"n from group key": {`{"$firstN": {"n": {"$cond": [{"$eq": ["$_id", "a"]}, 1, 2]}, "input": "$_id"}}`,
			[]string{`[1]`, `[5]`}},
		"top":             {`{"$top": {"sortBy": {"s": 1}, "output": "$_id"}}`, []string{`2`, `5`}},
		"top tie first":   {`{"$top": {"sortBy": {"s": 1}, "output": ["$_id", "$v"]}}`, []string{`[2, "y"]`, `[5, "z"]`}},
		"top missing out": {`{"$top": {"sortBy": {"s": -1}, "output": "$nope"}}`, []string{`null`, `null`}},
		"bottom":          {`{"$bottom": {"sortBy": {"s": 1}, "output": "$_id"}}`, []string{`1`, `5`}},
		"bottom tie":      {`{"$bottom": {"sortBy": {"s": -1}, "output": "$_id"}}`, []string{`2`, `5`}},
		"topN":            {`{"$topN": {"n": 3, "sortBy": {"s": -1}, "output": "$_id"}}`, []string{`[1, 3, 2]`, `[5]`}},
		"bottomN":         {`{"$bottomN": {"n": 2, "sortBy": {"s": -1}, "output": "$_id"}}`, []string{`[2, 4]`, `[5]`}},
		"topN compound":   {`{"$topN": {"n": 2, "sortBy": {"s": 1, "_id": -1}, "output": "$_id"}}`, []string{`[4, 2]`, `[5]`}},
		"stdDevPop":       {`{"$stdDevPop": "$s"}`, []string{`0.82915619758885`, `0.0`}},
		"stdDevSamp":      {`{"$stdDevSamp": "$s"}`, []string{`0.9574271077563381`, `null`}},
		"stdDevPop none":  {`{"$stdDevPop": "$v"}`, []string{`null`, `null`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := runPipeline(t, `[{"$group": {"_id": "$g", "r": `+tt.acc+`}}, {"$sort": {"_id": 1}}]`, input)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("got %v", got)
			}
			for i, g := range []string{"a", "b"} {
				gotV := doc(t, got[i]).Lookup("r")
				wantV := val(t, tt.want[i])
				if gotV.Type != wantV.Type || !Equal(gotV, wantV) {
					if name[:6] == "stdDev" && gotV.Type == wantV.Type && wantV.Type == 1 && abs64(gotV.Double()-wantV.Double()) < 1e-12 {
						continue
					}
					t.Errorf("group %s: got %s, want %s", g, gotV, wantV)
				}
			}
		})
	}
}

func abs64(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func TestNAccumulatorErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		acc  string
		code int32
		msg  string
	}{
		"firstN not object":   {`{"$firstN": 1}`, 5787801, "specification must be an object; found $firstN: 1"},
		"maxN not object":     {`{"$maxN": "x"}`, 5787900, `specification must be an object; found $maxN: "x"`},
		"top not object":      {`{"$top": 1}`, 5788001, "specification must be an object; found $top: 1"},
		"firstN unknown":      {`{"$firstN": {"n": 1, "input": "$a", "x": 1}}`, 5787901, "Unknown argument for 'n' operator: x"},
		"firstN no n":         {`{"$firstN": {"input": "$a"}}`, 5787906, "Missing value for 'n'"},
		"firstN no input":     {`{"$firstN": {"n": 1}}`, 5787907, "Missing value for 'input'"},
		"top with n":          {`{"$top": {"n": 1, "sortBy": {"a": 1}, "output": "$a"}}`, 5788002, "Unknown argument to $top 'n'"},
		"topN input":          {`{"$topN": {"n": 1, "sortBy": {"a": 1}, "input": "$a"}}`, 5788002, "Unknown argument to $topN 'input'"},
		"topN no n":           {`{"$topN": {"sortBy": {"a": 1}, "output": "$a"}}`, 5788003, "Missing value for 'n'"},
		"top no output":       {`{"$top": {"sortBy": {"a": 1}}}`, 5788004, "Missing value for 'output'"},
		"top no sortBy":       {`{"$bottom": {"output": "$a"}}`, 5788005, "Missing value for 'sortBy'"},
		"top bad sort":        {`{"$top": {"sortBy": {"a": 2}, "output": "$a"}}`, 15975, ""},
		"n not number":        {`{"$firstN": {"n": "2", "input": "$a"}}`, 5787902, `Value for 'n' must be of integral type, but found "2"`},
		"n fraction":          {`{"$lastN": {"n": 1.5, "input": "$a"}}`, 5787903, "Value for 'n' must be of integral type, but found 1.5"},
		"n zero":              {`{"$minN": {"n": 0, "input": "$a"}}`, 5787908, "'n' must be greater than 0, found 0"},
		"n negative":          {`{"$topN": {"n": -2, "sortBy": {"a": 1}, "output": "$a"}}`, 5787908, "'n' must be greater than 0, found -2"},
		"array argument":      {`{"$push": ["$a", "$b"]}`, 40237, "The $push accumulator is a unary operator"},
		"stdDev array":        {`{"$stdDevPop": ["$a"]}`, 40237, "The $stdDevPop accumulator is a unary operator"},
		"unknown":             {`{"$median": "$a"}`, 15952, "unknown group operator '$median'"},
		"not an operator":     {`{"sum": 1}`, 40234, "The field 'r' must be an accumulator object"},
		"empty object":        {`{}`, 40234, "The field 'r' must be an accumulator object"},
		"two accumulators":    {`{"$sum": 1, "$max": 1}`, 40238, "The field 'r' must specify one accumulator"},
		"n sees only the key": {`{"$firstN": {"n": "$a", "input": "$a"}}`, 5787902, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := runPipeline(t, `[{"$group": {"_id": null, "r": `+tt.acc+`}}]`, []string{`{"a": 3}`})
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestNExpressions(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"arr": [5, null, 1, 3], "n": 2}`)
	tests := map[string]struct{ expr, want string }{
		"firstN":   {`{"$firstN": {"n": "$n", "input": "$arr"}}`, `[5, null]`},
		"lastN":    {`{"$lastN": {"n": 3, "input": "$arr"}}`, `[null, 1, 3]`},
		"maxN":     {`{"$maxN": {"n": 2, "input": "$arr"}}`, `[5, 3]`},
		"minN":     {`{"$minN": {"n": 10, "input": "$arr"}}`, `[1, 3, 5]`},
		"in let":   {`{"$let": {"vars": {"k": 1}, "in": {"$firstN": {"n": "$$k", "input": [7, 8]}}}}`, `[7]`},
		"stdDev":   {`{"$stdDevPop": [1, 3]}`, `1.0`},
		"stdDev 2": {`{"$stdDevSamp": "$arr"}`, `2.0`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tt.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			if w := val(t, tt.want); got.Type != w.Type || !Equal(got, w) {
				t.Fatalf("got %s, want %s", got, w)
			}
		})
	}
	e, err := CompileExpr(val(t, `{"$maxN": {"n": 1, "input": "$n"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(root)
	wantCode(t, err, 5788200, "Input must be an array")
}
