package mql

import "testing"

// Answers from the MongoDB 7.0 manual pages of $replaceOne, $replaceAll,
// $indexOfBytes and $indexOfCP, and mongod's expression.cpp for the
// errors.
func TestStringExpressions(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"s": "blue paint, blue sky", "u": "cafétéria", "n": null}`)
	tests := map[string]struct{ expr, want string }{
		"replaceOne":          {`{"$replaceOne": {"input": "$s", "find": "blue", "replacement": "red"}}`, `"red paint, blue sky"`},
		"replaceAll":          {`{"$replaceAll": {"input": "$s", "find": "blue", "replacement": "red"}}`, `"red paint, red sky"`},
		"replace not found":   {`{"$replaceOne": {"input": "$s", "find": "green", "replacement": "red"}}`, `"blue paint, blue sky"`},
		"replace null input":  {`{"$replaceAll": {"input": "$n", "find": "a", "replacement": "b"}}`, `null`},
		"replace missing":     {`{"$replaceAll": {"input": "$s", "find": "$nope", "replacement": "b"}}`, `null`},
		"replace empty find":  {`{"$replaceOne": {"input": "ab", "find": "", "replacement": "-"}}`, `"-ab"`},
		"indexOfBytes":        {`{"$indexOfBytes": ["$s", "blue"]}`, `0`},
		"indexOfBytes start":  {`{"$indexOfBytes": ["$s", "blue", 1]}`, `12`},
		"indexOfBytes end":    {`{"$indexOfBytes": ["$s", "blue", 1, 12]}`, `-1`},
		"indexOfBytes none":   {`{"$indexOfBytes": ["$s", "red"]}`, `-1`},
		"indexOfBytes null":   {`{"$indexOfBytes": ["$n", "a"]}`, `null`},
		"indexOfBytes past":   {`{"$indexOfBytes": ["abc", "", 5]}`, `-1`},
		"indexOfBytes empty":  {`{"$indexOfBytes": ["abc", "", 2]}`, `2`},
		"indexOfBytes utf8":   {`{"$indexOfBytes": ["$u", "t"]}`, `5`},
		"indexOfCP utf8":      {`{"$indexOfCP": ["$u", "t"]}`, `4`},
		"indexOfCP start":     {`{"$indexOfCP": ["$u", "é", 4]}`, `5`},
		"indexOfCP end":       {`{"$indexOfCP": ["$u", "é", 4, 5]}`, `-1`},
		"indexOfCP end large": {`{"$indexOfCP": ["$u", "a", 2, 100]}`, `8`},
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

func TestStringExpressionErrors(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"s": "abc", "i": 3}`)
	tests := map[string]struct {
		expr string
		code int32
		msg  string
	}{
		"replace not object":  {`{"$replaceOne": ["a", "b", "c"]}`, 51751, "$replaceOne requires an object as an argument, found: array"},
		"replace unknown":     {`{"$replaceAll": {"input": "a", "find": "b", "replacement": "c", "x": 1}}`, 51750, "$replaceAll found an unknown argument: x"},
		"replace no input":    {`{"$replaceOne": {"find": "b", "replacement": "c"}}`, 51749, "$replaceOne requires 'input' to be specified"},
		"replace no find":     {`{"$replaceOne": {"input": "b", "replacement": "c"}}`, 51748, "$replaceOne requires 'find' to be specified"},
		"replace no repl":     {`{"$replaceOne": {"input": "b", "find": "c"}}`, 51747, "$replaceOne requires 'replacement' to be specified"},
		"replace input type":  {`{"$replaceOne": {"input": "$i", "find": "b", "replacement": "c"}}`, 51746, "$replaceOne requires that 'input' be a string, found: 3"},
		"replace find type":   {`{"$replaceAll": {"input": "$s", "find": 1, "replacement": null}}`, 51745, "$replaceAll requires that 'find' be a string, found: 1"},
		"replace repl type":   {`{"$replaceAll": {"input": null, "find": "a", "replacement": 2}}`, 51744, "$replaceAll requires that 'replacement' be a string, found: 2"},
		"indexOf arity":       {`{"$indexOfBytes": ["$s"]}`, 28667, "Expression $indexOfBytes takes at least 2 arguments, and at most 4, but 1 were passed in."},
		"indexOf first":       {`{"$indexOfBytes": [1, "a"]}`, 40091, "$indexOfBytes requires a string as the first argument, found: int"},
		"indexOf second":      {`{"$indexOfBytes": ["$s", null]}`, 40092, "$indexOfBytes requires a string as the second argument, found: null"},
		"indexOfCP first":     {`{"$indexOfCP": [true, "a"]}`, 40093, "$indexOfCP requires a string as the first argument, found: bool"},
		"indexOfCP second":    {`{"$indexOfCP": ["$s", 1]}`, 40094, "$indexOfCP requires a string as the second argument, found: int"},
		"indexOf start type":  {`{"$indexOfBytes": ["$s", "a", 1.5]}`, 40096, "$indexOfBytes requires an integral starting index, found a value of type: double, with value: 1.5"},
		"indexOf start neg":   {`{"$indexOfCP": ["$s", "a", -1]}`, 40097, "$indexOfCP requires a nonnegative starting index, found: -1"},
		"indexOf end neg":     {`{"$indexOfBytes": ["$s", "a", 0, -2]}`, 40097, "$indexOfBytes requires a nonnegative ending index, found: -2"},
		"indexOf end missing": {`{"$indexOfBytes": ["$s", "a", 0, "$nope"]}`, 40096, ""},
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
