package mql

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// More expression operators: rounding and math, strings, arrays, objects
// and date parts.

// addMoreOperators registers the operators of this file in m.
func addMoreOperators(m map[string]struct {
	arity int
	fn    func(name string, args []bson.RawValue) (bson.RawValue, error)
}) {
	type entry = struct {
		arity int
		fn    func(name string, args []bson.RawValue) (bson.RawValue, error)
	}
	for name, e := range map[string]entry{
		"$floor": {1, evalRounding}, "$ceil": {1, evalRounding}, "$sqrt": {1, evalMath},
		"$exp": {1, evalMath}, "$ln": {1, evalMath}, "$log10": {1, evalMath},
		"$pow": {2, evalMath}, "$log": {2, evalMath},
		"$trunc": {-1, evalRoundPlace}, "$round": {-1, evalRoundPlace},
		"$substr": {3, evalSubstr}, "$substrBytes": {3, evalSubstr}, "$substrCP": {3, evalSubstr},
		"$split": {2, evalSplit}, "$strcasecmp": {2, evalStrcasecmp},
		"$slice": {-1, evalSlice}, "$reverseArray": {1, evalReverseArray},
		"$range": {-1, evalRange}, "$indexOfArray": {-1, evalIndexOfArray},
		"$mergeObjects": {-1, evalMergeObjects}, "$objectToArray": {1, evalObjectToArray},
		"$arrayToObject": {1, evalArrayToObject},
		"$rand":          {-1, evalRand}, "$isNumber": {1, evalIsNumber},
		"$setUnion": {-1, evalSetOp}, "$setIntersection": {-1, evalSetOp},
		"$setDifference": {2, evalSetOp}, "$setEquals": {-1, evalSetOp}, "$setIsSubset": {2, evalSetOp},
		"$anyElementTrue": {1, evalElementsTrue}, "$allElementsTrue": {1, evalElementsTrue},
	} {
		m[name] = e
	}
}

// evalRand is {$rand: {}}: a double in [0, 1).
func evalRand(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) != 1 || args[0].Type != bson.TypeEmbeddedDocument || arrayLen(args[0].Value) != 0 {
		return missing, mongoerr.New(10065, "invalid parameter: expected an object ($rand)")
	}
	return vDouble(rand.Float64()), nil
}

func numericArg(name string, v bson.RawValue, code int32) error {
	return mongoerr.New(code, "%s only supports numeric types, not %s", name, typeName(v.Type))
}

func evalRounding(name string, args []bson.RawValue) (bson.RawValue, error) {
	v := args[0]
	switch {
	case isNullish(v):
		return nullValue, nil
	case v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64:
		return v, nil
	case v.Type == bson.TypeDouble:
		if name == "$floor" {
			return vDouble(math.Floor(asFloat(v))), nil
		}
		return vDouble(math.Ceil(asFloat(v))), nil
	case v.Type == bson.TypeDecimal128:
		f := asFloat(v)
		if name == "$floor" {
			return vDecimal(decimalFromFloat(math.Floor(f))), nil
		}
		return vDecimal(decimalFromFloat(math.Ceil(f))), nil
	}
	return missing, numericArg(name, v, 28765)
}

func evalMath(name string, args []bson.RawValue) (bson.RawValue, error) {
	for _, a := range args {
		if isNullish(a) {
			return nullValue, nil
		}
		if !isNumeric(a.Type) {
			return missing, numericArg(name, a, 28765)
		}
	}
	x := asFloat(args[0])
	var r float64
	switch name {
	case "$sqrt":
		if x < 0 {
			return missing, mongoerr.New(28714, "$sqrt's argument must be greater than or equal to 0")
		}
		r = math.Sqrt(x)
	case "$exp":
		r = math.Exp(x)
	case "$ln":
		if x <= 0 {
			return missing, mongoerr.New(28766, "$ln's argument must be a positive number, but is %s", shortString(args[0]))
		}
		r = math.Log(x)
	case "$log10":
		if x <= 0 {
			return missing, mongoerr.New(28761, "$log10's argument must be a positive number, but is %s", shortString(args[0]))
		}
		r = math.Log10(x)
	case "$log":
		b := asFloat(args[1])
		if x <= 0 {
			return missing, mongoerr.New(28758, "$log's argument must be a positive number, but is %s", shortString(args[0]))
		}
		if b <= 0 || b == 1 {
			return missing, mongoerr.New(28759, "$log's base must be a positive number not equal to 1, but is %s", shortString(args[1]))
		}
		r = math.Log(x) / math.Log(b)
	case "$pow":
		base, exp := args[0], args[1]
		if Compare(base, vInt32(0)) == 0 && Compare(exp, vInt32(0)) < 0 {
			return missing, mongoerr.New(28764, "$pow cannot take a base of 0 and a negative exponent")
		}
		isInt := func(t bson.Type) bool { return t == bson.TypeInt32 || t == bson.TypeInt64 }
		if isInt(base.Type) && isInt(exp.Type) && asInt64(exp) >= 0 {
			// Integer powers stay integers while they fit.
			res := vInt32(1)
			for i := int64(0); i < asInt64(exp); i++ {
				res = arith(opMul, res, base)
				if res.Type == bson.TypeDouble {
					return vDouble(math.Pow(asFloat(base), asFloat(exp))), nil
				}
				if i > 64 && (asInt64(base) == 0 || asInt64(base) == 1 || asInt64(base) == -1) {
					break
				}
			}
			if base.Type == bson.TypeInt64 || exp.Type == bson.TypeInt64 {
				return vInt64(asInt64(res)), nil
			}
			return res, nil
		}
		r = math.Pow(x, asFloat(exp))
	}
	if args[0].Type == bson.TypeDecimal128 {
		return vDecimal(decimalFromFloat(r)), nil
	}
	return vDouble(r), nil
}

func evalRoundPlace(name string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 1 || len(args) > 2 {
		return missing, mongoerr.New(28667, "Expression %s takes at least 1 argument, and at most 2, but %d were passed in.", name, len(args))
	}
	v := args[0]
	place := int64(0)
	if len(args) == 2 {
		if isNullish(args[1]) {
			return nullValue, nil
		}
		p, ok := integral(args[1])
		if !ok || p < -20 || p > 100 {
			return missing, mongoerr.New(51083, "cannot apply %s with precision value %s value must be in [-20, 100]", name, shortString(args[1]))
		}
		place = p
	}
	switch {
	case isNullish(v):
		return nullValue, nil
	case !isNumeric(v.Type):
		return missing, mongoerr.New(51081, "%s only supports numeric types, not %s", name, typeName(v.Type))
	}
	f := asFloat(v)
	scale := math.Pow10(int(place))
	var r float64
	if name == "$round" {
		r = math.RoundToEven(f*scale) / scale
	} else {
		r = math.Trunc(f*scale) / scale
	}
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		if place >= 0 {
			return v, nil
		}
		if v.Type == bson.TypeInt32 {
			return vInt32(int32(r)), nil
		}
		return vInt64(int64(r)), nil
	case bson.TypeDecimal128:
		return vDecimal(decimalFromFloat(r)), nil
	}
	return vDouble(r), nil
}

func evalSubstr(name string, args []bson.RawValue) (bson.RawValue, error) {
	var s string
	switch {
	case isNullish(args[0]):
		s = ""
	case args[0].Type == bson.TypeString || args[0].Type == bson.TypeSymbol:
		s = str(args[0])
	case isNumeric(args[0].Type) || args[0].Type == bson.TypeDateTime:
		r, err := convertTo("string", args[0])
		if err != nil {
			return missing, err
		}
		s = str(r)
	default:
		return missing, mongoerr.New(16007, "can't convert from BSON type %s to String", typeName(args[0].Type))
	}
	if !isNumeric(args[1].Type) {
		return missing, mongoerr.New(34450, "%s: starting index must be a numeric type (is BSON type %s)", name, typeName(args[1].Type))
	}
	if !isNumeric(args[2].Type) {
		return missing, mongoerr.New(34452, "%s: length must be a numeric type (is BSON type %s)", name, typeName(args[2].Type))
	}
	start, length := asInt64(args[1]), asInt64(args[2])
	if name == "$substrCP" {
		if start < 0 {
			return missing, mongoerr.New(34455, "$substrCP: starting index must be non-negative (got: %d)", start)
		}
		if length < 0 {
			return missing, mongoerr.New(34456, "$substrCP: length must be a nonnegative integer.")
		}
		runes := []rune(s)
		if start >= int64(len(runes)) {
			return vString(""), nil
		}
		end := min(start+length, int64(len(runes)))
		return vString(string(runes[start:end])), nil
	}
	if start < 0 || start >= int64(len(s)) {
		return vString(""), nil
	}
	end := int64(len(s))
	if length >= 0 {
		end = min(start+length, end)
	}
	out := s[start:end]
	if !utf8.ValidString(out) && utf8.ValidString(s) {
		return missing, mongoerr.New(28656, "%s: Invalid range, starting index is a UTF-8 continuation byte.", name)
	}
	return vString(out), nil
}

func evalSplit(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeString {
		return missing, mongoerr.New(40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", typeName(args[0].Type))
	}
	if args[1].Type != bson.TypeString {
		return missing, mongoerr.New(40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", typeName(args[1].Type))
	}
	sep := str(args[1])
	if sep == "" {
		return missing, mongoerr.New(40087, "$split requires a non-empty separator")
	}
	parts := strings.Split(str(args[0]), sep)
	vals := make([]bson.RawValue, len(parts))
	for i, p := range parts {
		vals[i] = vString(p)
	}
	return vArray(vals), nil
}

func evalStrcasecmp(_ string, args []bson.RawValue) (bson.RawValue, error) {
	conv := func(v bson.RawValue) (string, error) {
		if isNullish(v) {
			return "", nil
		}
		r, err := convertTo("string", v)
		if err != nil {
			return "", err
		}
		return asciiCase(str(r), true), nil
	}
	a, err := conv(args[0])
	if err != nil {
		return missing, err
	}
	b, err := conv(args[1])
	if err != nil {
		return missing, err
	}
	return vInt32(int32(strings.Compare(a, b))), nil
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

// int32Value returns a numeric v as an int32 when its value is integral
// and in range (mongod's Value::integral).
func int32Value(v bson.RawValue) (int32, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int32(asInt64(v)), true
	case bson.TypeInt64:
		i := asInt64(v)
		return int32(i), i == int64(int32(i))
	case bson.TypeDouble, bson.TypeDecimal128:
		f := asFloat(v)
		if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
			return 0, false
		}
		return int32(f), true
	}
	return 0, false
}

// cppDouble formats f as a C++ output stream does by default (6
// significant digits), the way mongod words numbers in some messages.
func cppDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
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

func evalMergeObjects(_ string, args []bson.RawValue) (bson.RawValue, error) {
	acc := &mergeAcc{}
	for _, a := range args {
		if isNullish(a) {
			continue
		}
		if a.Type != bson.TypeEmbeddedDocument {
			return missing, mongoerr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", shortString(a), typeName(a.Type))
		}
		acc.add(a)
	}
	return acc.result(), nil
}

// mergeAcc merges documents, later fields replacing earlier ones in place.
type mergeAcc struct {
	keys []string
	vals map[string]bson.RawValue
}

func (m *mergeAcc) add(v bson.RawValue) {
	if v.Type != bson.TypeEmbeddedDocument {
		return
	}
	if m.vals == nil {
		m.vals = map[string]bson.RawValue{}
	}
	it := iterDoc(v.Value)
	for {
		k, e, ok := it.next()
		if !ok {
			return
		}
		key := string(k)
		if _, seen := m.vals[key]; !seen {
			m.keys = append(m.keys, key)
		}
		m.vals[key] = e
	}
}

func (m *mergeAcc) result() bson.RawValue {
	d := newDoc(64)
	for _, k := range m.keys {
		d.add(k, m.vals[k])
	}
	return vDoc(d.done())
}

func evalObjectToArray(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeEmbeddedDocument {
		return missing, mongoerr.New(40390, "$objectToArray requires a document input, found: %s", typeName(args[0].Type))
	}
	var out []bson.RawValue
	it := iterDoc(args[0].Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		d := newDoc(len(k) + len(v.Value) + 16)
		d.add("k", vString(string(k)))
		d.add("v", v)
		out = append(out, vDoc(d.done()))
	}
	return vArray(out), nil
}

func evalArrayToObject(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(40386, "$arrayToObject requires an array input, found: %s", typeName(args[0].Type))
	}
	m := &mergeAcc{}
	for _, e := range arrayValues(args[0].Value) {
		var k, v bson.RawValue
		switch e.Type {
		case bson.TypeEmbeddedDocument:
			k, v = lookup(e.Value, "k"), lookup(e.Value, "v")
			if arrayLen(e.Value) != 2 || k.Type == 0 || v.Type == 0 {
				return missing, mongoerr.New(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", arrayLen(e.Value))
			}
		case bson.TypeArray:
			pair := arrayValues(e.Value)
			if len(pair) != 2 {
				return missing, mongoerr.New(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(pair))
			}
			k, v = pair[0], pair[1]
		default:
			return missing, mongoerr.New(40398, "Unrecognised input type format for $arrayToObject: %s", typeName(e.Type))
		}
		if k.Type != bson.TypeString {
			return missing, mongoerr.New(40394, "$arrayToObject requires a string as the key, found: %s", typeName(k.Type))
		}
		d := newDoc(16 + len(v.Value))
		d.add(str(k), v)
		m.add(vDoc(d.done()))
	}
	return m.result(), nil
}

// compileDateToString compiles {$dateToString: {date, format, timezone, onNull}}.
func compileDateToString(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(18629, "$dateToString only supports an object as its argument")
	}
	var dateE, formatE, tzE, onNullE expr
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		switch string(k) {
		case "date":
			dateE = e
		case "format":
			formatE = e
		case "timezone":
			tzE = e
		case "onNull":
			onNullE = e
		default:
			return nil, mongoerr.New(18534, "Unrecognized argument to $dateToString: %s", k)
		}
	}
	if dateE == nil {
		return nil, mongoerr.New(18628, "Missing 'date' parameter to $dateToString")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		format := "%Y-%m-%dT%H:%M:%S.%LZ"
		if formatE != nil {
			f, err := formatE.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(f) {
				return nullValue, nil
			}
			if f.Type != bson.TypeString {
				return missing, mongoerr.New(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", typeName(f.Type), shortString(f))
			}
			format = str(f)
		}
		loc := time.UTC
		if tzE != nil {
			tz, err := tzE.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(tz) {
				return nullValue, nil
			}
			if loc, err = parseTimezone(tz); err != nil {
				return missing, err
			}
		}
		d, err := dateE.eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(d) {
			if onNullE != nil {
				return onNullE.eval(c)
			}
			return nullValue, nil
		}
		var t time.Time
		switch d.Type {
		case bson.TypeDateTime:
			t = time.UnixMilli(asInt64(d))
		case bson.TypeTimestamp:
			sec, _ := d.Timestamp()
			t = time.Unix(int64(sec), 0)
		case bson.TypeObjectID:
			t = d.ObjectID().Timestamp()
		default:
			return missing, mongoerr.New(16006, "can't convert from BSON type %s to Date", typeName(d.Type))
		}
		out, err := formatDate(format, t.In(loc))
		if err != nil {
			return missing, err
		}
		return vString(out), nil
	}}, nil
}

// parseTimezone accepts an Olson name or a UTC offset (+hh, +hhmm, +hh:mm).
func parseTimezone(v bson.RawValue) (*time.Location, error) {
	if v.Type != bson.TypeString {
		return nil, mongoerr.New(40517, "timezone must evaluate to a string, found %s", typeName(v.Type))
	}
	s := str(v)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		digits := strings.ReplaceAll(s[1:], ":", "")
		if len(digits) == 2 {
			digits += "00"
		}
		if len(digits) == 4 && strings.Trim(digits, "0123456789") == "" {
			h := int(digits[0]-'0')*10 + int(digits[1]-'0')
			m := int(digits[2]-'0')*10 + int(digits[3]-'0')
			off := h*3600 + m*60
			if s[0] == '-' {
				off = -off
			}
			return time.FixedZone(s, off), nil
		}
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, mongoerr.New(40485, "unrecognized time zone identifier: \"%s\"", s)
	}
	return loc, nil
}

// formatDate renders t with $dateToString's format specifiers.
func formatDate(format string, t time.Time) (string, error) {
	var b strings.Builder
	pad := func(n, width int) {
		s := strings.Repeat("0", width) + itoa(n)
		b.WriteString(s[len(s)-max(width, len(itoa(n))):])
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			return "", mongoerr.New(18535, "Unmatched '%%' at end of format string")
		}
		i++
		switch format[i] {
		case 'Y':
			pad(t.Year(), 4)
		case 'G':
			y, _ := t.ISOWeek()
			pad(y, 4)
		case 'm':
			pad(int(t.Month()), 2)
		case 'd':
			pad(t.Day(), 2)
		case 'H':
			pad(t.Hour(), 2)
		case 'M':
			pad(t.Minute(), 2)
		case 'S':
			pad(t.Second(), 2)
		case 'L':
			pad(t.Nanosecond()/1e6, 3)
		case 'j':
			pad(t.YearDay(), 3)
		case 'w':
			pad(int(t.Weekday())+1, 1)
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			pad(wd, 1)
		case 'U':
			pad((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'V':
			_, w := t.ISOWeek()
			pad(w, 2)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			b.WriteRune(sign)
			pad(off/3600, 2)
			pad(off%3600/60, 2)
		case 'Z':
			_, off := t.Zone()
			b.WriteString(itoa(off / 60))
		case '%':
			b.WriteByte('%')
		default:
			return "", mongoerr.New(18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return b.String(), nil
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// compileFieldOp compiles $getField, $setField and $unsetField, which
// reach fields whose names contain dots or start with '$'.
func compileFieldOp(name string, arg bson.RawValue, vars scope) (expr, error) {
	var fieldV, inputV, valueV bson.RawValue
	if arg.Type == bson.TypeEmbeddedDocument && !isOperatorDoc(arg) {
		it := iterDoc(arg.Value)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "field":
				fieldV = v
			case "input":
				inputV = v
			case "value":
				if name != "$setField" {
					return nil, mongoerr.New(4161104, "%s found an unknown argument: value", name)
				}
				valueV = v
			default:
				return nil, mongoerr.New(4161104, "%s found an unknown argument: %s", name, k)
			}
		}
	} else if name == "$getField" {
		fieldV = arg
	} else {
		return nil, mongoerr.New(4161100, "%s only supports an object as its argument", name)
	}
	// The field name must be a constant string, possibly inside $literal.
	if isOperatorDoc(fieldV) {
		if lit := lookup(fieldV.Value, "$literal"); lit.Type != 0 && arrayLen(fieldV.Value) == 1 {
			fieldV = lit
		}
	}
	if fieldV.Type != bson.TypeString {
		return nil, mongoerr.New(4161106, "%s requires 'field' to evaluate to type String, but got %s", name, typeName(fieldV.Type))
	}
	if name != "$getField" && inputV.Type == 0 {
		return nil, mongoerr.New(4161102, "%s requires 'input' to be specified", name)
	}
	if name == "$setField" && valueV.Type == 0 {
		return nil, mongoerr.New(4161103, "$setField requires 'value' to be specified")
	}
	field := str(fieldV)
	var inE, valE expr
	var err error
	if inputV.Type != 0 {
		if inE, err = compileExpr(inputV, vars); err != nil {
			return nil, err
		}
	} else {
		inE = &fieldPathExpr{variable: "CURRENT"}
	}
	if valueV.Type != 0 {
		if valE, err = compileExpr(valueV, vars); err != nil {
			return nil, err
		}
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := inE.eval(c)
		if err != nil {
			return missing, err
		}
		switch {
		case isNullish(in):
			if name == "$getField" {
				return missing, nil
			}
			return nullValue, nil
		case in.Type != bson.TypeEmbeddedDocument:
			return missing, mongoerr.New(3041705, "%s requires 'input' to evaluate to type Object", name)
		}
		if name == "$getField" {
			return lookup(in.Value, field), nil
		}
		var v bson.RawValue
		if valE != nil {
			if v, err = valE.eval(c); err != nil {
				return missing, err
			}
		}
		d := newDoc(len(in.Value) + len(v.Value) + len(field) + 8)
		it := iterDoc(in.Value)
		set := false
		for {
			k, e, ok := it.next()
			if !ok {
				break
			}
			if string(k) == field {
				if !set {
					d.add(field, v)
					set = true
				}
				continue
			}
			d.addBytesKey(k, e)
		}
		if !set {
			d.add(field, v)
		}
		return vDoc(d.done()), nil
	}}, nil
}

func evalIsNumber(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vBool(isNumeric(args[0].Type)), nil
}

// valueSet is a set of values under Equal, in insertion order.
type valueSet struct {
	keys map[string]bool
	vals []bson.RawValue
}

func newValueSet(vals []bson.RawValue) *valueSet {
	s := &valueSet{keys: map[string]bool{}}
	for _, v := range vals {
		s.add(v)
	}
	return s
}

func (s *valueSet) add(v bson.RawValue) {
	k := string(appendKey(nil, v))
	if !s.keys[k] {
		s.keys[k] = true
		s.vals = append(s.vals, v)
	}
}

func (s *valueSet) has(v bson.RawValue) bool { return s.keys[string(appendKey(nil, v))] }

func evalSetOp(name string, args []bson.RawValue) (bson.RawValue, error) {
	sets := make([]*valueSet, len(args))
	for i, a := range args {
		if isNullish(a) && (name == "$setUnion" || name == "$setIntersection" || name == "$setDifference") {
			return nullValue, nil
		}
		if a.Type != bson.TypeArray {
			return missing, mongoerr.New(17044, "All operands of %s must be arrays. One argument is of type: %s", name, typeName(a.Type))
		}
		sets[i] = newValueSet(arrayValues(a.Value))
	}
	switch name {
	case "$setUnion":
		u := newValueSet(nil)
		for _, s := range sets {
			for _, v := range s.vals {
				u.add(v)
			}
		}
		return vArray(u.vals), nil
	case "$setIntersection":
		if len(sets) == 0 {
			return vArray(nil), nil
		}
		var out []bson.RawValue
		for _, v := range sets[0].vals {
			in := true
			for _, s := range sets[1:] {
				in = in && s.has(v)
			}
			if in {
				out = append(out, v)
			}
		}
		return vArray(out), nil
	case "$setDifference":
		var out []bson.RawValue
		for _, v := range sets[0].vals {
			if !sets[1].has(v) {
				out = append(out, v)
			}
		}
		return vArray(out), nil
	case "$setIsSubset":
		for _, v := range sets[0].vals {
			if !sets[1].has(v) {
				return falseValue, nil
			}
		}
		return trueValue, nil
	}
	// $setEquals
	if len(sets) < 2 {
		return missing, mongoerr.New(17045, "$setEquals needs at least two arguments had: %d", len(sets))
	}
	for _, s := range sets[1:] {
		if len(s.vals) != len(sets[0].vals) {
			return falseValue, nil
		}
		for _, v := range sets[0].vals {
			if !s.has(v) {
				return falseValue, nil
			}
		}
	}
	return trueValue, nil
}

func evalElementsTrue(name string, args []bson.RawValue) (bson.RawValue, error) {
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(17040, "%s's argument must be an array, but is %s", name, typeName(args[0].Type))
	}
	anyTrue := name == "$anyElementTrue"
	for _, e := range arrayValues(args[0].Value) {
		if truthy(e) == anyTrue {
			return vBool(anyTrue), nil
		}
	}
	return vBool(!anyTrue), nil
}
