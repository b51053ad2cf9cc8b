package mql

import (
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// String expressions after mongod's expression.cpp: $replaceOne and
// $replaceAll (ExpressionReplaceBase), $indexOfBytes and $indexOfCP.

// compileReplace compiles {$replaceOne|$replaceAll: {input, find,
// replacement}}.
func compileReplace(name string, arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(51751, "%s requires an object as an argument, found: %s", name, typeName(arg.Type))
	}
	var parts [3]expr // input, find, replacement
	names := [3]string{"input", "find", "replacement"}
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		i := -1
		for j, n := range names {
			if string(k) == n {
				i = j
			}
		}
		if i < 0 {
			return nil, mongoerr.New(51750, "%s found an unknown argument: %s", name, k)
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		parts[i] = e
	}
	for i, code := range []int32{51749, 51748, 51747} {
		if parts[i] == nil {
			return nil, mongoerr.New(code, "%s requires '%s' to be specified", name, names[i])
		}
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		var vals [3]bson.RawValue
		for i, e := range parts {
			v, err := e.eval(c)
			if err != nil {
				return missing, err
			}
			vals[i] = v
		}
		// Every argument is type checked before a null makes the result null.
		for i, code := range []int32{51746, 51745, 51744} {
			if vals[i].Type != bson.TypeString && !isNullish(vals[i]) {
				return missing, mongoerr.New(code, "%s requires that '%s' be a string, found: %s", name, names[i], shortString(vals[i]))
			}
		}
		for _, v := range vals {
			if isNullish(v) {
				return nullValue, nil
			}
		}
		n := 1
		if name == "$replaceAll" {
			n = -1
		}
		return vString(strings.Replace(str(vals[0]), str(vals[1]), str(vals[2]), n)), nil
	}}, nil
}

// evalIndexOf is $indexOfBytes and $indexOfCP: [string, substring,
// start, end], indexes in bytes or code points; -1 when not found.
func evalIndexOf(name string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 2 || len(args) > 4 {
		return missing, mongoerr.New(28667, "Expression %s takes at least 2 arguments, and at most 4, but %d were passed in.", name, len(args))
	}
	cp := name == "$indexOfCP"
	firstCode, secondCode := int32(40091), int32(40092)
	if cp {
		firstCode, secondCode = 40093, 40094
	}
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeString {
		return missing, mongoerr.New(firstCode, "%s requires a string as the first argument, found: %s", name, typeName(args[0].Type))
	}
	if args[1].Type != bson.TypeString {
		return missing, mongoerr.New(secondCode, "%s requires a string as the second argument, found: %s", name, typeName(args[1].Type))
	}
	s, token := str(args[0]), str(args[1])
	length := len(s)
	if cp {
		length = utf8.RuneCountInString(s)
	}
	start, end := 0, length
	for i, what := range []string{"starting index", "ending index"} {
		if len(args) <= i+2 {
			break
		}
		v := args[i+2]
		n, ok := int32Value(v)
		if !ok {
			return missing, mongoerr.New(40096, "%s requires an integral %s, found a value of type: %s, with value: %s", name, what, typeName(v.Type), shortString(v))
		}
		if n < 0 {
			return missing, mongoerr.New(40097, "%s requires a nonnegative %s, found: %s", name, what, shortString(v))
		}
		if i == 0 {
			start = int(n)
		} else {
			end = min(int(n), length)
		}
	}
	if start > length || start > end {
		return vInt32(-1), nil
	}
	if !cp {
		i := strings.Index(s[start:end], token)
		if i < 0 {
			return vInt32(-1), nil
		}
		return vInt32(int32(start + i)), nil
	}
	// Work in byte offsets of the code points start and end.
	from, to := cpOffset(s, start), cpOffset(s, end)
	i := strings.Index(s[from:to], token)
	if i < 0 {
		return vInt32(-1), nil
	}
	return vInt32(int32(start + utf8.RuneCountInString(s[from:from+i]))), nil
}

// cpOffset is the byte offset of code point n of s (len(s) past the end).
func cpOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
