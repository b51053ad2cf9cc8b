package mql

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Array expressions taking a document of arguments, after mongod's
// ExpressionSortArray and ExpressionZip.

// compileSortArray compiles {$sortArray: {input, sortBy}}: sortBy 1 or
// -1 sorts the values in BSON order, a sort document sorts documents by
// its fields. The sort is stable.
func compileSortArray(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(2942500, "$sortArray requires an object as an argument, found: %s", typeName(arg.Type))
	}
	var input, sortBy bson.RawValue
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "input":
			input = v
		case "sortBy":
			sortBy = v
		default:
			return nil, mongoerr.New(2942501, "$sortArray found an unknown argument: %s", k)
		}
	}
	switch {
	case input.Type == 0:
		return nil, mongoerr.New(2942502, "$sortArray requires 'input' to be specified")
	case sortBy.Type == 0:
		return nil, mongoerr.New(2942503, "$sortArray requires 'sortBy' to be specified")
	}
	inE, err := compileExpr(input, vars)
	if err != nil {
		return nil, err
	}
	dir := 0
	var srt *Sort
	switch {
	case sortBy.Type == bson.TypeEmbeddedDocument:
		if srt, err = CompileSort(sortBy.Value); err != nil {
			return nil, err
		}
	case isNumeric(sortBy.Type) && (asFloat(sortBy) == 1 || asFloat(sortBy) == -1):
		dir = int(asFloat(sortBy))
	default:
		return nil, mongoerr.New(2942505, "$sortArray requires sortBy to be either 1, -1, or a sort document, found: %s", shortString(sortBy))
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := inE.eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(in) {
			return nullValue, nil
		}
		if in.Type != bson.TypeArray {
			return missing, mongoerr.New(2942504, "The input argument to $sortArray must be an array, but was of type: %s", typeName(in.Type))
		}
		vals := arrayValues(in.Value)
		if srt == nil {
			slices.SortStableFunc(vals, func(a, b bson.RawValue) int { return dir * Compare(a, b) })
			return vArray(vals), nil
		}
		// Values that are not documents have none of the sort fields.
		asDoc := func(v bson.RawValue) bson.Raw {
			if v.Type == bson.TypeEmbeddedDocument {
				return v.Value
			}
			return emptyDoc
		}
		slices.SortStableFunc(vals, func(a, b bson.RawValue) int { return srt.Compare(asDoc(a), asDoc(b)) })
		return vArray(vals), nil
	}}, nil
}

// compileZip compiles {$zip: {inputs, useLongestLength, defaults}}.
func compileZip(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(34460, "$zip only supports an object as an argument, found %s", typeName(arg.Type))
	}
	var inputs, defaults []expr
	longest := false
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "inputs", "defaults":
			if v.Type != bson.TypeArray {
				return nil, mongoerr.New(map[string]int32{"inputs": 34461, "defaults": 34462}[string(k)],
					"%s must be an array of expressions, found %s", k, typeName(v.Type))
			}
			es, err := compileArgs(v, vars)
			if err != nil {
				return nil, err
			}
			if string(k) == "inputs" {
				inputs = es
			} else {
				defaults = es
			}
		case "useLongestLength":
			if v.Type != bson.TypeBoolean {
				return nil, mongoerr.New(34463, "useLongestLength must be a bool, found %s", typeName(v.Type))
			}
			longest = v.Boolean()
		default:
			return nil, mongoerr.New(34464, "$zip found an unknown argument: %s", k)
		}
	}
	switch {
	case len(inputs) == 0:
		return nil, mongoerr.New(34465, "$zip requires at least one input array")
	case len(defaults) > 0 && !longest:
		return nil, mongoerr.New(34466, "cannot specify defaults unless useLongestLength is true")
	case len(defaults) > 0 && len(defaults) != len(inputs):
		return nil, mongoerr.New(34467, "defaults and inputs must have the same length")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		arrays := make([][]bson.RawValue, len(inputs))
		n := -1
		for i, e := range inputs {
			v, err := e.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(v) {
				return nullValue, nil
			}
			if v.Type != bson.TypeArray {
				return missing, mongoerr.New(34468, "$zip found a non-array expression in input: %s", shortString(v))
			}
			arrays[i] = arrayValues(v.Value)
			switch {
			case n < 0:
				n = len(arrays[i])
			case longest:
				n = max(n, len(arrays[i]))
			default:
				n = min(n, len(arrays[i]))
			}
		}
		defs := make([]bson.RawValue, len(inputs))
		for i := range defs {
			defs[i] = nullValue
			if len(defaults) > 0 {
				v, err := defaults[i].eval(c)
				if err != nil {
					return missing, err
				}
				if v.Type != 0 {
					defs[i] = v
				}
			}
		}
		out := make([]bson.RawValue, n)
		for j := range n {
			row := make([]bson.RawValue, len(arrays))
			for i, a := range arrays {
				row[i] = defs[i]
				if j < len(a) {
					row[i] = a[j]
				}
			}
			out[j] = vArray(row)
		}
		return vArray(out), nil
	}}, nil
}
