package mql

import (
	"testing"
	"time"
)

// The expected answers follow mongod's ExpressionSlice::evaluate and the
// server's jstests/aggregation/expressions/slice.js.
func TestSliceExpression(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"arr": [0, 1, 2, 3, 4], "s": "x", "nul": null}`)
	tests := map[string]struct{ expr, want string }{
		"count":                   {`{"$slice": ["$arr", 2]}`, `[0, 1]`},
		"count double":            {`{"$slice": ["$arr", 2.0]}`, `[0, 1]`},
		"count long":              {`{"$slice": ["$arr", {"$numberLong": "2"}]}`, `[0, 1]`},
		"count decimal":           {`{"$slice": ["$arr", {"$numberDecimal": "2"}]}`, `[0, 1]`},
		"negative count":          {`{"$slice": ["$arr", -2]}`, `[3, 4]`},
		"zero count":              {`{"$slice": ["$arr", 0]}`, `[]`},
		"count past end":          {`{"$slice": ["$arr", 10]}`, `[0, 1, 2, 3, 4]`},
		"negative count past end": {`{"$slice": ["$arr", -10]}`, `[0, 1, 2, 3, 4]`},
		"position and n":          {`{"$slice": ["$arr", 1, 2]}`, `[1, 2]`},
		"position past end":       {`{"$slice": ["$arr", 10, 2]}`, `[]`},
		"n past end":              {`{"$slice": ["$arr", 3, 10]}`, `[3, 4]`},
		"negative position":       {`{"$slice": ["$arr", -2, 1]}`, `[3]`},
		"negative position clamp": {`{"$slice": ["$arr", -10, 2]}`, `[0, 1]`},
		"empty array":             {`{"$slice": [[], 1]}`, `[]`},
		"null array":              {`{"$slice": ["$nul", 1]}`, `null`},
		"missing array":           {`{"$slice": ["$nope", 1]}`, `null`},
		"null count":              {`{"$slice": ["$arr", null]}`, `null`},
		"null count, bad array":   {`{"$slice": ["$s", null]}`, `null`},
		"null third":              {`{"$slice": ["$arr", 1, null]}`, `null`},
		"missing third":           {`{"$slice": ["$arr", 1, "$nope"]}`, `null`},
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
			if w := val(t, tt.want); !Equal(got, w) || got.Type != w.Type {
				t.Fatalf("got %s, want %s", got, w)
			}
		})
	}
}

func TestSliceExpressionErrors(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"arr": [0, 1, 2], "s": "x"}`)
	tests := map[string]struct {
		expr string
		code int32
		msg  string
	}{
		"one argument":   {`{"$slice": ["$arr"]}`, 28667, "Expression $slice takes at least 2 arguments, and at most 3, but 1 were passed in."},
		"four arguments": {`{"$slice": ["$arr", 1, 2, 3]}`, 28667, "Expression $slice takes at least 2 arguments, and at most 3, but 4 were passed in."},
		"not an array":   {`{"$slice": ["$s", 1]}`, 28724, "First argument to $slice must be an array, but is of type: string"},
		"count string":   {`{"$slice": ["$arr", "1"]}`, 28725, "Second argument to $slice must be a numeric value, but is of type: string"},
		"count fraction": {`{"$slice": ["$arr", 1.5]}`, 28726, "Second argument to $slice can't be represented as a 32-bit integer: 1.5"},
		"count too big":  {`{"$slice": ["$arr", {"$numberLong": "3000000000"}]}`, 28726, "Second argument to $slice can't be represented as a 32-bit integer: 3e+09"},
		"n string":       {`{"$slice": ["$arr", 0, "1"]}`, 28727, "Third argument to $slice must be numeric, but is of type: string"},
		"n fraction":     {`{"$slice": ["$arr", 0, 2.5]}`, 28728, "Third argument to $slice can't be represented as a 32-bit integer: 2.5"},
		"n zero":         {`{"$slice": ["$arr", 0, 0]}`, 28729, "Third argument to $slice must be positive: 0"},
		"n negative":     {`{"$slice": ["$arr", 0, -1]}`, 28729, "Third argument to $slice must be positive: -1"},
		"array before n": {`{"$slice": ["$s", 0, "x"]}`, 28724, ""},
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

// The CRUD spec's pipeline update truncating an array with $slice.
func TestSliceInPipelineUpdate(t *testing.T) {
	t.Parallel()
	u, err := CompileUpdate(val(t, `[{"$set": {"arr": {"$slice": ["$arr", 2]}, "tail": {"$slice": ["$arr", -1]}}}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := u.Apply(doc(t, `{"_id": 1, "arr": [1, 2, 3, 4]}`), ApplyOptions{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	sameDoc(t, got, `{"_id": 1, "arr": [1, 2], "tail": [4]}`)
}
