package mql

import "testing"

// Answers from the MongoDB 7.0 manual pages of $sortArray and $zip; the
// errors from mongod's ExpressionSortArray and ExpressionZip.
func TestArrayExpressions(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"team": [{"name": "pat", "age": 30}, {"name": "dallas", "age": 36}, {"name": "charlie", "age": 42}], "nums": [3, "a", 1, null, 2.5], "a": [1, 2, 3], "b": ["x", "y"]}`)
	tests := map[string]struct{ expr, want string }{
		"sortArray by field": {`{"$sortArray": {"input": "$team", "sortBy": {"name": 1}}}`, `[{"name": "charlie", "age": 42}, {"name": "dallas", "age": 36}, {"name": "pat", "age": 30}]`},
		"sortArray desc":     {`{"$sortArray": {"input": "$team", "sortBy": {"age": -1}}}`, `[{"name": "charlie", "age": 42}, {"name": "dallas", "age": 36}, {"name": "pat", "age": 30}]`},
		"sortArray values":   {`{"$sortArray": {"input": "$nums", "sortBy": 1}}`, `[null, 1, 2.5, 3, "a"]`},
		"sortArray values -": {`{"$sortArray": {"input": "$nums", "sortBy": -1}}`, `["a", 3, 2.5, 1, null]`},
		"sortArray null":     {`{"$sortArray": {"input": "$nope", "sortBy": 1}}`, `null`},
		"sortArray mixed":    {`{"$sortArray": {"input": [{"k": 2}, 5, {"k": 1}], "sortBy": {"k": 1}}}`, `[5, {"k": 1}, {"k": 2}]`},
		"zip":                {`{"$zip": {"inputs": ["$a", "$b"]}}`, `[[1, "x"], [2, "y"]]`},
		"zip longest":        {`{"$zip": {"inputs": ["$a", "$b"], "useLongestLength": true}}`, `[[1, "x"], [2, "y"], [3, null]]`},
		"zip defaults":       {`{"$zip": {"inputs": ["$a", "$b"], "useLongestLength": true, "defaults": [0, "z"]}}`, `[[1, "x"], [2, "y"], [3, "z"]]`},
		"zip null input":     {`{"$zip": {"inputs": ["$a", "$nope"]}}`, `null`},
		"zip one":            {`{"$zip": {"inputs": [[[1, 2]]]}}`, `[[[1, 2]]]`},
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
}

func TestArrayExpressionErrors(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"s": "x"}`)
	tests := map[string]struct {
		expr string
		code int32
		msg  string
	}{
		"sortArray not object": {`{"$sortArray": [1]}`, 2942500, "$sortArray requires an object as an argument, found: array"},
		"sortArray unknown":    {`{"$sortArray": {"input": [], "sortBy": 1, "x": 1}}`, 2942501, "$sortArray found an unknown argument: x"},
		"sortArray no input":   {`{"$sortArray": {"sortBy": 1}}`, 2942502, "$sortArray requires 'input' to be specified"},
		"sortArray no sortBy":  {`{"$sortArray": {"input": []}}`, 2942503, "$sortArray requires 'sortBy' to be specified"},
		"sortArray not array":  {`{"$sortArray": {"input": "$s", "sortBy": 1}}`, 2942504, "The input argument to $sortArray must be an array, but was of type: string"},
		"sortArray bad sortBy": {`{"$sortArray": {"input": [], "sortBy": 2}}`, 2942505, ""},
		"zip not object":       {`{"$zip": []}`, 34460, "$zip only supports an object as an argument, found array"},
		"zip inputs type":      {`{"$zip": {"inputs": 1}}`, 34461, "inputs must be an array of expressions, found int"},
		"zip defaults type":    {`{"$zip": {"inputs": [], "defaults": 1}}`, 34462, "defaults must be an array of expressions, found int"},
		"zip longest type":     {`{"$zip": {"inputs": [[1]], "useLongestLength": 1}}`, 34463, "useLongestLength must be a bool, found int"},
		"zip unknown":          {`{"$zip": {"inputs": [[1]], "x": 1}}`, 34464, "$zip found an unknown argument: x"},
		"zip no inputs":        {`{"$zip": {"inputs": []}}`, 34465, "$zip requires at least one input array"},
		"zip defaults alone":   {`{"$zip": {"inputs": [[1]], "defaults": [1]}}`, 34466, "cannot specify defaults unless useLongestLength is true"},
		"zip defaults length":  {`{"$zip": {"inputs": [[1]], "defaults": [1, 2], "useLongestLength": true}}`, 34467, "defaults and inputs must have the same length"},
		"zip not array":        {`{"$zip": {"inputs": [[1], "$s"]}}`, 34468, `$zip found a non-array expression in input: "x"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tt.expr))
			if err == nil {
				_, err = e.Eval(root)
			}
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}
