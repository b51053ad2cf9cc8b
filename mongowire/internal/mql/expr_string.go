package mql

import (
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// String expressions after mongod's expression.cpp: $concat, case,
// lengths, $substr*, $split, $strcasecmp, $trim, the regex operators,
// $replaceOne and $replaceAll (ExpressionReplaceBase), $indexOfBytes and
// $indexOfCP.

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

func evalConcat(_ string, args []bson.RawValue) (bson.RawValue, error) {
	var b strings.Builder
	for _, a := range args {
		switch a.Type {
		case 0, bson.TypeNull, bson.TypeUndefined:
			return nullValue, nil
		case bson.TypeString:
			b.Write(stringBytes(a))
		default:
			return missing, mongoerr.New(16702, "$concat only supports strings, not %s", typeName(a.Type))
		}
	}
	return vString(b.String()), nil
}

func evalCase(name string, args []bson.RawValue) (bson.RawValue, error) {
	a := args[0]
	var s string
	switch {
	case isNullish(a):
		return vString(""), nil
	case a.Type == bson.TypeString || a.Type == bson.TypeSymbol:
		s = string(stringBytes(a))
	case isNumeric(a.Type) || a.Type == bson.TypeDateTime || a.Type == bson.TypeTimestamp:
		r, err := convertTo("string", a)
		if err != nil {
			return missing, err
		}
		s = str(r)
	default:
		return missing, mongoerr.New(16007, "can't convert from BSON type %s to String", typeName(a.Type))
	}
	if name == "$toLower" {
		return vString(asciiCase(s, false)), nil
	}
	return vString(asciiCase(s, true)), nil
}

// asciiCase changes the case of ASCII letters only, as MongoDB does.
func asciiCase(s string, upper bool) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case upper && c >= 'a' && c <= 'z':
			b[i] = c - 32
		case !upper && c >= 'A' && c <= 'Z':
			b[i] = c + 32
		}
	}
	return string(b)
}

func evalStrLen(name string, args []bson.RawValue) (bson.RawValue, error) {
	if args[0].Type != bson.TypeString {
		return missing, mongoerr.New(34471, "%s requires a string argument, found: %s", name, typeName(args[0].Type))
	}
	s := stringBytes(args[0])
	if name == "$strLenBytes" {
		return vInt32(int32(len(s))), nil
	}
	return vInt32(int32(len([]rune(string(s))))), nil
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

func compileTrim(name string, arg bson.RawValue, vars scope) (expr, error) {
	args, err := namedArgs(name, arg, vars, "input", "chars")
	if err != nil {
		return nil, err
	}
	if args["input"] == nil {
		return nil, mongoerr.New(50695, "%s requires an 'input' field", name)
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := args["input"].eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(in) {
			return nullValue, nil
		}
		if in.Type != bson.TypeString {
			return missing, mongoerr.New(50699, "%s requires its input to be a string, got %s (of type %s) instead.", name, shortString(in), typeName(in.Type))
		}
		cut := " \t\n\r\v\f\x00\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
		if e := args["chars"]; e != nil {
			ch, err := e.eval(c)
			if err != nil {
				return missing, err
			}
			if isNullish(ch) {
				return nullValue, nil
			}
			if ch.Type != bson.TypeString {
				return missing, mongoerr.New(50700, "%s requires 'chars' to be a string, got %s (of type %s) instead.", name, shortString(ch), typeName(ch.Type))
			}
			cut = str(ch)
		}
		s := str(in)
		switch name {
		case "$ltrim":
			s = strings.TrimLeft(s, cut)
		case "$rtrim":
			s = strings.TrimRight(s, cut)
		default:
			s = strings.Trim(s, cut)
		}
		return vString(s), nil
	}}, nil
}

func compileRegexOp(name string, arg bson.RawValue, vars scope) (expr, error) {
	args, err := namedArgs(name, arg, vars, "input", "regex", "options")
	if err != nil {
		return nil, err
	}
	if args["input"] == nil {
		return nil, mongoerr.New(31022, "%s requires 'input' parameter", name)
	}
	if args["regex"] == nil {
		return nil, mongoerr.New(31023, "%s requires 'regex' parameter", name)
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := args["input"].eval(c)
		if err != nil {
			return missing, err
		}
		rv, err := args["regex"].eval(c)
		if err != nil {
			return missing, err
		}
		var pattern, opts string
		switch rv.Type {
		case bson.TypeString:
			pattern = str(rv)
		case bson.TypeRegex:
			pattern, opts, _ = rv.RegexOK()
		case 0, bson.TypeNull, bson.TypeUndefined:
			return regexNoMatch(name), nil
		default:
			return missing, mongoerr.New(51105, "%s needs 'regex' to be of type string or regex", name)
		}
		if e := args["options"]; e != nil {
			o, err := e.eval(c)
			if err != nil {
				return missing, err
			}
			if o.Type == bson.TypeString {
				if opts != "" && str(o) != "" {
					return missing, mongoerr.New(51075, "%s found regex option(s) specified in both 'regex' and 'option' fields", name)
				}
				opts += str(o)
			}
		}
		if isNullish(in) {
			return regexNoMatch(name), nil
		}
		if in.Type != bson.TypeString {
			return missing, mongoerr.New(51104, "%s needs 'input' to be of type string", name)
		}
		re, err := compileRegex(pattern, opts, name)
		if err != nil {
			return missing, err
		}
		s := str(in)
		switch name {
		case "$regexMatch":
			return vBool(re.MatchString(s)), nil
		case "$regexFind":
			m := re.FindStringSubmatchIndex(s)
			if m == nil {
				return nullValue, nil
			}
			return regexResult(s, m), nil
		}
		var out []bson.RawValue
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			out = append(out, regexResult(s, m))
		}
		return vArray(out), nil
	}}, nil
}

func regexNoMatch(name string) bson.RawValue {
	switch name {
	case "$regexMatch":
		return falseValue
	case "$regexFind":
		return nullValue
	}
	return vArray(nil)
}

// regexResult is $regexFind's {match, idx, captures}; idx counts code points.
func regexResult(s string, m []int) bson.RawValue {
	d := newDoc(64)
	d.add("match", vString(s[m[0]:m[1]]))
	d.add("idx", vInt32(int32(len([]rune(s[:m[0]])))))
	var caps []bson.RawValue
	for i := 2; i+1 < len(m); i += 2 {
		if m[i] < 0 {
			caps = append(caps, nullValue)
			continue
		}
		caps = append(caps, vString(s[m[i]:m[i+1]]))
	}
	d.add("captures", vArray(caps))
	return vDoc(d.done())
}
