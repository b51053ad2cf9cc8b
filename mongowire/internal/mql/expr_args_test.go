package mql

import "testing"

// Parse errors of the operators taking a document of arguments, with
// mongod's codes (expression.cpp: ExpressionFilter, ExpressionMap,
// ExpressionLet, ExpressionReduce, ExpressionTrim, ExpressionRegex).
func TestNamedArgumentErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		expr string
		code int32
		msg  string
	}{
		"filter not object": {`{"$filter": 1}`, 28646, "$filter only supports an object as its argument"},
		"filter unknown":    {`{"$filter": {"input": [], "cond": true, "x": 1}}`, 28647, "Unrecognized parameter to $filter: x"},
		"filter no input":   {`{"$filter": {"cond": true}}`, 28648, "Missing 'input' parameter to $filter"},
		"filter no cond":    {`{"$filter": {"input": []}}`, 28650, "Missing 'cond' parameter to $filter"},
		"map not object":    {`{"$map": 1}`, 16878, "$map only supports an object as its argument"},
		"map unknown":       {`{"$map": {"input": [], "in": 1, "cond": 1}}`, 16879, "Unrecognized parameter to $map: cond"},
		"map no in":         {`{"$map": {"input": []}}`, 16882, "Missing 'in' parameter to $map"},
		"let unknown":       {`{"$let": {"vars": {}, "in": 1, "x": 1}}`, 16875, "Unrecognized parameter to $let: x"},
		"let no vars":       {`{"$let": {"in": 1}}`, 16876, "Missing 'vars' parameter to $let"},
		"let vars type":     {`{"$let": {"vars": 1, "in": 1}}`, 10065, "invalid parameter: expected an object (vars)"},
		"reduce unknown":    {`{"$reduce": {"input": [], "initialValue": 0, "in": 1, "x": 1}}`, 40076, "$reduce found an unknown argument: x"},
		"trim not object":   {`{"$trim": "x"}`, 50696, "$trim only supports an object as an argument, found string"},
		"rtrim unknown":     {`{"$rtrim": {"input": "x", "x": 1}}`, 50694, "$rtrim found an unknown argument: x"},
		"regex not object":  {`{"$regexMatch": "x"}`, 51103, "$regexMatch expects an object of named arguments but found: string"},
		"regex unknown":     {`{"$regexFind": {"input": "x", "regex": "x", "y": 1}}`, 31024, "$regexFind found an unknown argument: y"},
		"convert unknown":   {`{"$convert": {"input": 1, "to": "int", "y": 1}}`, 9, "$convert found an unknown argument: y"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileExpr(val(t, tt.expr))
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestFilterLimit(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"a": [1, 2, 3, 4, 5]}`)
	tests := map[string]struct{ expr, want string }{
		"limit":       {`{"$filter": {"input": "$a", "cond": {"$gt": ["$$this", 1]}, "limit": 2}}`, `[2, 3]`},
		"limit large": {`{"$filter": {"input": "$a", "as": "x", "cond": {"$gt": ["$$x", 3]}, "limit": 9}}`, `[4, 5]`},
		"limit null":  {`{"$filter": {"input": "$a", "cond": true, "limit": null}}`, `[1, 2, 3, 4, 5]`},
		"map input":   {`{"$map": {"input": "$nope", "in": 1}}`, `null`},
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
	errs := map[string]struct {
		expr string
		code int32
	}{
		"limit zero":     {`{"$filter": {"input": "$a", "cond": true, "limit": 0}}`, 327392},
		"limit fraction": {`{"$filter": {"input": "$a", "cond": true, "limit": 1.5}}`, 327391},
		"map not array":  {`{"$map": {"input": 5, "in": 1}}`, 16883},
		"filter string":  {`{"$filter": {"input": "s", "cond": true}}`, 28651},
	}
	for name, tt := range errs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tt.expr))
			if err == nil {
				_, err = e.Eval(root)
			}
			wantCode(t, err, tt.code, "")
		})
	}
}
