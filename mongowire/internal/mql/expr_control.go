package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Expressions taking a document of named arguments: $convert, $switch,
// $reduce, $regexMatch/$regexFind/$regexFindAll and $trim.

// namedArgErrors are mongod's codes for an argument that is not a
// document and for an unknown field, by operator; $convert uses
// FailedToParse for both.
var namedArgErrors = map[string]struct {
	notObject, unknown int32
	format             string // of the not-object message: op, type name
}{
	"$trim":         {50696, 50694, "%s only supports an object as an argument, found %s"},
	"$ltrim":        {50696, 50694, "%s only supports an object as an argument, found %s"},
	"$rtrim":        {50696, 50694, "%s only supports an object as an argument, found %s"},
	"$regexMatch":   {51103, 31024, "%s expects an object of named arguments but found: %s"},
	"$regexFind":    {51103, 31024, "%s expects an object of named arguments but found: %s"},
	"$regexFindAll": {51103, 31024, "%s expects an object of named arguments but found: %s"},
}

// namedArgs compiles the fields of an operator's argument document.
func namedArgs(op string, arg bson.RawValue, vars scope, allowed ...string) (map[string]expr, error) {
	codes, ok := namedArgErrors[op]
	if !ok {
		codes.notObject, codes.unknown = mongoerr.FailedToParse, mongoerr.FailedToParse
		codes.format = "%s expects an object of named arguments but found: %s"
	}
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(codes.notObject, codes.format, op, typeName(arg.Type))
	}
	out := map[string]expr{}
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			return out, nil
		}
		name := string(k)
		known := false
		for _, a := range allowed {
			known = known || a == name
		}
		if !known {
			return nil, mongoerr.New(codes.unknown, "%s found an unknown argument: %s", op, name)
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		out[name] = e
	}
}

// convertTargets maps $convert's "to" type names to convertTo's targets.
var convertTargets = map[string]string{
	"double": "double", "string": "string", "objectId": "objectid", "bool": "bool",
	"date": "date", "int": "int", "long": "long", "decimal": "decimal",
}

func compileConvert(arg bson.RawValue, vars scope) (expr, error) {
	args, err := namedArgs("$convert", arg, vars, "input", "to", "onError", "onNull")
	if err != nil {
		return nil, err
	}
	if args["input"] == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'input' parameter to $convert")
	}
	if args["to"] == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'to' parameter to $convert")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := args["input"].eval(c)
		if err != nil {
			return missing, err
		}
		to, err := args["to"].eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(in) {
			if e := args["onNull"]; e != nil {
				return e.eval(c)
			}
			return nullValue, nil
		}
		var target string
		switch {
		case isNullish(to):
			return nullValue, nil
		case to.Type == bson.TypeString:
			t, ok := convertTargets[str(to)]
			if !ok {
				return missing, mongoerr.New(mongoerr.BadValue, "Unknown type name: %s", str(to))
			}
			target = t
		case isNumeric(to.Type):
			code, _ := integral(to)
			for n, t := range convertTargets {
				if typeNames[n] == bson.Type(code) {
					target = t
				}
			}
			if target == "" {
				return missing, mongoerr.New(mongoerr.FailedToParse, "In $convert, numeric value for 'to' does not correspond to a BSON type: %s", shortString(to))
			}
		default:
			return missing, mongoerr.New(mongoerr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", typeName(to.Type))
		}
		out, err := convertTo(target, in)
		if err != nil {
			if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.ConversionFailure && args["onError"] != nil {
				return args["onError"].eval(c)
			}
			return missing, err
		}
		return out, nil
	}}, nil
}

func compileSwitch(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40060, "$switch requires an object as an argument, found: %s", typeName(arg.Type))
	}
	type branch struct{ cond, then expr }
	var branches []branch
	var dflt expr
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "branches":
			if v.Type != bson.TypeArray {
				return nil, mongoerr.New(40061, "$switch expected an array for 'branches', found: %s", typeName(v.Type))
			}
			for _, b := range arrayValues(v.Value) {
				if b.Type != bson.TypeEmbeddedDocument {
					return nil, mongoerr.New(40062, "$switch expected each branch to be an object, found: %s", typeName(b.Type))
				}
				var br branch
				bit := iterDoc(b.Value)
				for {
					bk, bv, ok := bit.next()
					if !ok {
						break
					}
					e, err := compileExpr(bv, vars)
					if err != nil {
						return nil, err
					}
					switch string(bk) {
					case "case":
						br.cond = e
					case "then":
						br.then = e
					default:
						return nil, mongoerr.New(40063, "$switch found an unknown argument to a branch: %s", bk)
					}
				}
				if br.cond == nil {
					return nil, mongoerr.New(40064, "$switch requires each branch have a 'case' expression")
				}
				if br.then == nil {
					return nil, mongoerr.New(40065, "$switch requires each branch have a 'then' expression.")
				}
				branches = append(branches, br)
			}
		case "default":
			e, err := compileExpr(v, vars)
			if err != nil {
				return nil, err
			}
			dflt = e
		default:
			return nil, mongoerr.New(40067, "$switch found an unknown argument: %s", k)
		}
	}
	if len(branches) == 0 {
		return nil, mongoerr.New(40068, "$switch requires at least one branch.")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for _, b := range branches {
			v, err := b.cond.eval(c)
			if err != nil {
				return missing, err
			}
			if truthy(v) {
				return b.then.eval(c)
			}
		}
		if dflt == nil {
			return missing, mongoerr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return dflt.eval(c)
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
