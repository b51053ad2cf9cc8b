package mql

import (
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Array expressions: $arrayElemAt, $concatArrays, $filter, $first, $in,
// $indexOfArray, $isArray, $last, $map, $range, $reduce, $reverseArray,
// $size, $slice, and ($sortArray, $zip) after mongod's ExpressionSortArray
// and ExpressionZip.

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
		if c.coll != nil {
			return missing, collatedExprRefused("$sortArray")
		}
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

func evalIn(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if args[1].Type != bson.TypeArray {
		return missing, mongoerr.New(40081, "$in requires an array as a second argument, found: %s", typeName(args[1].Type))
	}
	for _, e := range arrayValues(args[1].Value) {
		if Compare(args[0], e) == 0 {
			return trueValue, nil
		}
	}
	return falseValue, nil
}

func evalSize(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(17124, "The argument to $size must be an array. Type of argument is: %s", typeName(args[0].Type))
	}
	return vInt32(int32(arrayLen(args[0].Value))), nil
}

func evalArrayElemAt(_ string, args []bson.RawValue) (bson.RawValue, error) {
	arr, idx := args[0], args[1]
	if isNullish(arr) || isNullish(idx) {
		return nullValue, nil
	}
	if arr.Type != bson.TypeArray {
		return missing, mongoerr.New(28689, "$arrayElemAt's first argument must be an array, but is %s", typeName(arr.Type))
	}
	if !isNumeric(idx.Type) {
		return missing, mongoerr.New(28690, "$arrayElemAt's second argument must be a numeric value, but is %s", typeName(idx.Type))
	}
	f := asFloat(idx)
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return missing, mongoerr.New(28691, "$arrayElemAt's second argument must be representable as a 32-bit integer: %s", shortString(idx))
	}
	elems := arrayValues(arr.Value)
	i := int(f)
	if i < 0 {
		i += len(elems)
	}
	if i < 0 || i >= len(elems) {
		return missing, nil
	}
	return elems[i], nil
}

func evalIsArray(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vBool(args[0].Type == bson.TypeArray), nil
}

func evalConcatArrays(_ string, args []bson.RawValue) (bson.RawValue, error) {
	var out []bson.RawValue
	for _, a := range args {
		if isNullish(a) {
			return nullValue, nil
		}
		if a.Type != bson.TypeArray {
			return missing, mongoerr.New(28664, "$concatArrays only supports arrays, not %s", typeName(a.Type))
		}
		out = append(out, arrayValues(a.Value)...)
	}
	return vArray(out), nil
}

func evalFirstLast(name string, args []bson.RawValue) (bson.RawValue, error) {
	a := args[0]
	if isNullish(a) {
		return nullValue, nil
	}
	if a.Type != bson.TypeArray {
		return missing, mongoerr.New(28689, "%s's argument must be an array, but is %s", name, typeName(a.Type))
	}
	elems := arrayValues(a.Value)
	if len(elems) == 0 {
		return missing, nil
	}
	if name == "$first" {
		return elems[0], nil
	}
	return elems[len(elems)-1], nil
}

// evalSlice is the $slice expression, [array, n] or [array, position, n],
// checked in mongod's order (ExpressionSlice::evaluate): a nullish array
// or second argument gives null before any type check; a nullish third
// argument gives null once the first two are valid.
func evalSlice(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 2 || len(args) > 3 {
		return missing, mongoerr.New(28667, "Expression $slice takes at least 2 arguments, and at most 3, but %d were passed in.", len(args))
	}
	if isNullish(args[0]) || isNullish(args[1]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(28724, "First argument to $slice must be an array, but is of type: %s", typeName(args[0].Type))
	}
	if !isNumeric(args[1].Type) {
		return missing, mongoerr.New(28725, "Second argument to $slice must be a numeric value, but is of type: %s", typeName(args[1].Type))
	}
	n, ok := int32Value(args[1])
	if !ok {
		return missing, mongoerr.New(28726, "Second argument to $slice can't be represented as a 32-bit integer: %s", cppDouble(asFloat(args[1])))
	}
	elems := arrayValues(args[0].Value)
	if len(args) == 2 {
		if n >= 0 {
			return vArray(sliceElems(elems, 0, int64(n))), nil
		}
		return vArray(sliceElems(elems, int64(n), -1)), nil
	}
	if isNullish(args[2]) {
		return nullValue, nil
	}
	if !isNumeric(args[2].Type) {
		return missing, mongoerr.New(28727, "Third argument to $slice must be numeric, but is of type: %s", typeName(args[2].Type))
	}
	limit, ok := int32Value(args[2])
	if !ok {
		return missing, mongoerr.New(28728, "Third argument to $slice can't be represented as a 32-bit integer: %s", cppDouble(asFloat(args[2])))
	}
	if limit <= 0 {
		return missing, mongoerr.New(28729, "Third argument to $slice must be positive: %d", limit)
	}
	return vArray(sliceElems(elems, int64(n), int64(limit))), nil
}

func evalReverseArray(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(34435, "The argument to $reverseArray must be an array, but was of type: %s", typeName(args[0].Type))
	}
	elems := arrayValues(args[0].Value)
	for i, j := 0, len(elems)-1; i < j; i, j = i+1, j-1 {
		elems[i], elems[j] = elems[j], elems[i]
	}
	return vArray(elems), nil
}

func evalRange(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 2 || len(args) > 3 {
		return missing, mongoerr.New(28667, "Expression $range takes at least 2 arguments, and at most 3, but %d were passed in.", len(args))
	}
	names := []string{"starting value", "ending value", "step value"}
	var n [3]int64
	n[2] = 1
	for i, a := range args {
		v, ok := integral(a)
		if !ok || v != int64(int32(v)) {
			return missing, mongoerr.New(34443+int32(i), "$range requires a %s that can be represented as a 32-bit integer, found value: %s", names[i], shortString(a))
		}
		n[i] = v
	}
	if n[2] == 0 {
		return missing, mongoerr.New(34449, "$range requires a non-zero step value")
	}
	var out []bson.RawValue
	for i := n[0]; (n[2] > 0 && i < n[1]) || (n[2] < 0 && i > n[1]); i += n[2] {
		out = append(out, vInt32(int32(i)))
		if len(out) > 1<<20 {
			return missing, mongoerr.New(mongoerr.BadValue, "$range would produce too many elements")
		}
	}
	return vArray(out), nil
}

func evalIndexOfArray(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 2 || len(args) > 4 {
		return missing, mongoerr.New(28667, "Expression $indexOfArray takes at least 2 arguments, and at most 4, but %d were passed in.", len(args))
	}
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(40090, "$indexOfArray requires an array as a first argument, found: %s", typeName(args[0].Type))
	}
	elems := arrayValues(args[0].Value)
	start, end := int64(0), int64(len(elems))
	if len(args) > 2 {
		v, ok := integral(args[2])
		if !ok || v < 0 {
			return missing, mongoerr.New(40097, "$indexOfArray requires a nonnegative integral starting index")
		}
		start = v
	}
	if len(args) > 3 {
		v, ok := integral(args[3])
		if !ok || v < 0 {
			return missing, mongoerr.New(40097, "$indexOfArray requires a nonnegative integral ending index")
		}
		end = min(v, end)
	}
	for i := start; i < end; i++ {
		if Compare(elems[i], args[1]) == 0 {
			return vInt32(int32(i)), nil
		}
	}
	return vInt32(-1), nil
}

func compileMapFilter(name string, arg bson.RawValue, vars scope) (expr, error) {
	// mongod's codes: $map 16878-16883, $filter 28646-28651.
	notObject, unknown, noInput, noBody, notArray := int32(16878), int32(16879), int32(16880), int32(16882), int32(16883)
	allowed := []string{"input", "as", "in"}
	if name == "$filter" {
		notObject, unknown, noInput, noBody, notArray = 28646, 28647, 28648, 28650, 28651
		allowed = []string{"input", "as", "cond", "limit"}
	}
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(notObject, "%s only supports an object as its argument", name)
	}
	if err := checkParams(name, arg.Value, unknown, allowed...); err != nil {
		return nil, err
	}
	input := lookup(arg.Value, "input")
	as := "this"
	if a := lookup(arg.Value, "as"); a.Type == bson.TypeString {
		as = str(a)
	}
	bodyKey := "in"
	if name == "$filter" {
		bodyKey = "cond"
	}
	body := lookup(arg.Value, bodyKey)
	if input.Type == 0 {
		return nil, mongoerr.New(noInput, "Missing 'input' parameter to %s", name)
	}
	if body.Type == 0 {
		return nil, mongoerr.New(noBody, "Missing '%s' parameter to %s", bodyKey, name)
	}
	inE, err := compileExpr(input, vars)
	if err != nil {
		return nil, err
	}
	var limitE expr
	if l := lookup(arg.Value, "limit"); l.Type != 0 {
		if limitE, err = compileExpr(l, vars); err != nil {
			return nil, err
		}
	}
	bodyE, err := compileExpr(body, append(append(scope{}, vars...), as))
	if err != nil {
		return nil, err
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := inE.eval(c)
		if err != nil {
			return missing, err
		}
		switch in.Type {
		case 0, bson.TypeNull, bson.TypeUndefined:
			return nullValue, nil
		case bson.TypeArray:
		default:
			return missing, mongoerr.New(notArray, "input to %s must be an array not %s", name, typeName(in.Type))
		}
		limit := -1
		if limitE != nil {
			l, err := limitE.eval(c)
			if err != nil {
				return missing, err
			}
			// A null limit is no limit (ExpressionFilter::evaluate).
			if !isNullish(l) {
				n, ok := int32Value(l)
				if !ok {
					return missing, mongoerr.New(327391, "$filter: limit must be represented as a 32-bit integral value: %s", shortString(l))
				}
				if n < 1 {
					return missing, mongoerr.New(327392, "$filter: limit must be greater than 0: %d", n)
				}
				limit = int(n)
			}
		}
		var out []bson.RawValue
		for _, e := range arrayValues(in.Value) {
			if limit >= 0 && len(out) == limit {
				break
			}
			r, err := bodyE.eval(c.with(as, e))
			if err != nil {
				return missing, err
			}
			if name == "$filter" {
				if truthy(r) {
					out = append(out, e)
				}
				continue
			}
			if r.Type == 0 {
				r = nullValue
			}
			out = append(out, r)
		}
		return vArray(out), nil
	}}, nil
}

func compileReduce(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40075, "$reduce requires an object as an argument, found: %s", typeName(arg.Type))
	}
	it := iterDoc(arg.Value)
	for {
		k, _, ok := it.next()
		if !ok {
			break
		}
		if f := string(k); f != "input" && f != "initialValue" && f != "in" {
			return nil, mongoerr.New(40076, "$reduce found an unknown argument: %s", f)
		}
	}
	input, init, in := lookup(arg.Value, "input"), lookup(arg.Value, "initialValue"), lookup(arg.Value, "in")
	switch {
	case input.Type == 0:
		return nil, mongoerr.New(40077, "$reduce requires 'input' to be specified")
	case init.Type == 0:
		return nil, mongoerr.New(40078, "$reduce requires 'initialValue' to be specified")
	case in.Type == 0:
		return nil, mongoerr.New(40079, "$reduce requires 'in' to be specified")
	}
	inputE, err := compileExpr(input, vars)
	if err != nil {
		return nil, err
	}
	initE, err := compileExpr(init, vars)
	if err != nil {
		return nil, err
	}
	inE, err := compileExpr(in, append(append(scope{}, vars...), "value", "this"))
	if err != nil {
		return nil, err
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		arr, err := inputE.eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(arr) {
			return nullValue, nil
		}
		if arr.Type != bson.TypeArray {
			return missing, mongoerr.New(40080, "$reduce requires 'input' to be an array, found: %s", typeName(arr.Type))
		}
		acc, err := initE.eval(c)
		if err != nil {
			return missing, err
		}
		for _, e := range arrayValues(arr.Value) {
			if acc, err = inE.eval(c.with("value", acc).with("this", e)); err != nil {
				return missing, err
			}
		}
		return acc, nil
	}}, nil
}
