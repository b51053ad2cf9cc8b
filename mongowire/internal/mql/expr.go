package mql

import (
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Expr is a compiled aggregation expression. It is safe for concurrent use.
type Expr struct{ e expr }

// expr is one node of an expression tree.
type expr interface {
	eval(c *evalCtx) (bson.RawValue, error)
}

// evalCtx is the state an expression is evaluated in.
type evalCtx struct {
	root    bson.Raw
	current bson.Raw
	now     time.Time
	vars    map[string]bson.RawValue // $let, $map and $filter bindings
}

func (c *evalCtx) with(name string, v bson.RawValue) *evalCtx {
	n := *c
	n.vars = make(map[string]bson.RawValue, len(c.vars)+1)
	for k, x := range c.vars {
		n.vars[k] = x
	}
	n.vars[name] = v
	return &n
}

// CompileExpr compiles an aggregation expression: a field path ("$a.b"),
// a variable ("$$ROOT"), an operator document ({$add: [...]}), an object
// or array of expressions, or a literal. Unknown operators fail with 168
// InvalidPipelineOperator "Unrecognized expression '$foo'".
func CompileExpr(v bson.RawValue) (*Expr, error) {
	e, err := compileExpr(v, nil)
	if err != nil {
		return nil, err
	}
	return &Expr{e: e}, nil
}

// Eval evaluates the expression with $$ROOT and $$CURRENT bound to root.
// A missing field evaluates to a RawValue with Type 0.
func (e *Expr) Eval(root bson.Raw) (bson.RawValue, error) {
	return e.e.eval(&evalCtx{root: root, current: root, now: time.Now()})
}

func (e *Expr) evalIn(c *evalCtx) (bson.RawValue, error) { return e.e.eval(c) }

type literalExpr struct{ v bson.RawValue }

func (l literalExpr) eval(*evalCtx) (bson.RawValue, error) { return l.v, nil }

// fieldPathExpr is $path or $$var.path.
type fieldPathExpr struct {
	variable string // "CURRENT", "ROOT", "NOW", "REMOVE" or a user variable
	path     []string
}

func (f *fieldPathExpr) eval(c *evalCtx) (bson.RawValue, error) {
	var base bson.RawValue
	switch f.variable {
	case "CURRENT":
		base = vDoc(c.current)
	case "ROOT":
		base = vDoc(c.root)
	case "NOW":
		base = vTime(c.now)
	case "REMOVE":
		return missing, nil
	default:
		v, ok := c.vars[f.variable]
		if !ok {
			return missing, mongoerr.New(mongoerr.Location17276, "Use of undefined variable: %s", f.variable)
		}
		base = v
	}
	return evalPath(base, f.path), nil
}

// evalPath follows path through documents; through an array it maps the
// rest of the path over the elements and collects what is found.
func evalPath(v bson.RawValue, path []string) bson.RawValue {
	for i, comp := range path {
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			v = lookup(v.Value, comp)
		case bson.TypeArray:
			var out []bson.RawValue
			for _, e := range arrayValues(v.Value) {
				if e.Type != bson.TypeEmbeddedDocument && e.Type != bson.TypeArray {
					continue
				}
				if r := evalPath(e, path[i:]); r.Type != 0 {
					out = append(out, r)
				}
			}
			return vArray(out)
		default:
			return missing
		}
	}
	return v
}

type objectExpr struct {
	keys []string
	vals []expr
}

func (o *objectExpr) eval(c *evalCtx) (bson.RawValue, error) {
	d := newDoc(64)
	for i, k := range o.keys {
		v, err := o.vals[i].eval(c)
		if err != nil {
			return missing, err
		}
		d.add(k, v)
	}
	return vDoc(d.done()), nil
}

type arrayExpr []expr

func (a arrayExpr) eval(c *evalCtx) (bson.RawValue, error) {
	out := make([]bson.RawValue, len(a))
	for i, e := range a {
		v, err := e.eval(c)
		if err != nil {
			return missing, err
		}
		if v.Type == 0 {
			v = nullValue
		}
		out[i] = v
	}
	return vArray(out), nil
}

// opExpr applies an operator to its evaluated arguments.
type opExpr struct {
	name string
	args []expr
	fn   func(name string, args []bson.RawValue) (bson.RawValue, error)
}

func (o *opExpr) eval(c *evalCtx) (bson.RawValue, error) {
	vals := make([]bson.RawValue, len(o.args))
	for i, a := range o.args {
		v, err := a.eval(c)
		if err != nil {
			return missing, err
		}
		vals[i] = v
	}
	return o.fn(o.name, vals)
}

// lazyExpr evaluates its arguments itself ($cond, $and, $or, $ifNull,
// $let, $map, $filter).
type lazyExpr struct {
	fn func(c *evalCtx) (bson.RawValue, error)
}

func (l lazyExpr) eval(c *evalCtx) (bson.RawValue, error) { return l.fn(c) }

// scope lists the variable names bound around an expression being compiled.
type scope []string

func (s scope) has(name string) bool {
	for _, n := range s {
		if n == name {
			return true
		}
	}
	return false
}

func compileExpr(v bson.RawValue, vars scope) (expr, error) {
	switch v.Type {
	case bson.TypeString:
		s := str(v)
		if strings.HasPrefix(s, "$") {
			return compileFieldPath(s, vars)
		}
		return literalExpr{v}, nil
	case bson.TypeArray:
		var out arrayExpr
		for _, e := range arrayValues(v.Value) {
			c, err := compileExpr(e, vars)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	case bson.TypeEmbeddedDocument:
		return compileObjectOrOp(v.Value, vars)
	}
	return literalExpr{v}, nil
}

func compileFieldPath(s string, vars scope) (expr, error) {
	if s == "$" {
		return nil, mongoerr.New(16872, "'$' by itself is not a valid FieldPath")
	}
	if strings.HasPrefix(s, "$$") {
		parts := strings.Split(s[2:], ".")
		name := parts[0]
		switch name {
		case "CURRENT", "ROOT", "NOW", "REMOVE":
		default:
			if !vars.has(name) {
				if name == "" || !isVarName(name) {
					return nil, mongoerr.New(16870, "FieldPath '%s' doesn't start with $ or is not a valid variable name", s)
				}
				return nil, mongoerr.New(mongoerr.Location17276, "Use of undefined variable: %s", name)
			}
		}
		if err := checkPathParts(parts[1:]); err != nil {
			return nil, err
		}
		return &fieldPathExpr{variable: name, path: parts[1:]}, nil
	}
	parts := strings.Split(s[1:], ".")
	if err := checkPathParts(parts); err != nil {
		return nil, err
	}
	return &fieldPathExpr{variable: "CURRENT", path: parts}, nil
}

func isVarName(s string) bool {
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z' && i > 0, c >= '0' && c <= '9' && i > 0, c == '_' && i > 0, c > 127:
		default:
			return false
		}
	}
	return true
}

func checkPathParts(parts []string) error {
	for _, p := range parts {
		if p == "" {
			return mongoerr.New(mongoerr.Location15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			return mongoerr.New(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if strings.IndexByte(p, 0) >= 0 {
			// A BSON field name is a C string: it cannot hold a NUL.
			return mongoerr.New(16411, "FieldPath field names may not contain '\\0'.")
		}
	}
	return nil
}

func compileObjectOrOp(doc bson.Raw, vars scope) (expr, error) {
	it := iterDoc(doc)
	first, arg, ok := it.next()
	if !ok {
		return &objectExpr{}, nil
	}
	if len(first) > 0 && first[0] == '$' {
		if _, _, more := it.next(); more {
			n := 0
			it2 := iterDoc(doc)
			for {
				if _, _, ok := it2.next(); !ok {
					break
				}
				n++
			}
			return nil, mongoerr.New(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s, while parsing object %s", n, docString(doc), docString(doc))
		}
		return compileOperator(string(first), arg, vars)
	}
	o := &objectExpr{}
	it = iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		key := string(k)
		if strings.HasPrefix(key, "$") {
			return nil, mongoerr.New(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if strings.Contains(key, ".") {
			return nil, mongoerr.New(16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
		}
		c, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		o.keys = append(o.keys, key)
		o.vals = append(o.vals, c)
	}
	return o, nil
}

// operators maps each supported expression operator to its evaluator and
// arity (-1: any number, -2: at least one).
var operators map[string]struct {
	arity int
	fn    func(name string, args []bson.RawValue) (bson.RawValue, error)
}

func init() {
	type entry = struct {
		arity int
		fn    func(name string, args []bson.RawValue) (bson.RawValue, error)
	}
	operators = map[string]entry{
		"$add": {-1, evalAdd}, "$subtract": {2, evalSubtract}, "$multiply": {-1, evalMultiply},
		"$divide": {2, evalDivide}, "$mod": {2, evalMod}, "$abs": {1, evalAbs},
		"$concat": {-1, evalConcat}, "$toLower": {1, evalCase}, "$toUpper": {1, evalCase},
		"$eq": {2, evalCmp}, "$ne": {2, evalCmp}, "$gt": {2, evalCmp}, "$gte": {2, evalCmp},
		"$lt": {2, evalCmp}, "$lte": {2, evalCmp}, "$cmp": {2, evalCmp},
		"$not": {1, evalNot}, "$in": {2, evalIn}, "$size": {1, evalSize},
		"$arrayElemAt": {2, evalArrayElemAt}, "$isArray": {1, evalIsArray},
		"$concatArrays": {-1, evalConcatArrays}, "$type": {1, evalType},
		"$toString": {1, evalConvert}, "$toInt": {1, evalConvert}, "$toLong": {1, evalConvert},
		"$toDouble": {1, evalConvert}, "$toDecimal": {1, evalConvert}, "$toBool": {1, evalConvert},
		"$toObjectId": {1, evalConvert}, "$toDate": {1, evalConvert},
		"$sum": {-1, evalArrayAccumulator}, "$avg": {-1, evalArrayAccumulator},
		"$min": {-1, evalArrayAccumulator}, "$max": {-1, evalArrayAccumulator},
		"$stdDevPop": {-1, evalArrayAccumulator}, "$stdDevSamp": {-1, evalArrayAccumulator},
		"$first": {1, evalFirstLast}, "$last": {1, evalFirstLast},
		"$strLenBytes": {1, evalStrLen}, "$strLenCP": {1, evalStrLen},
		"$indexOfBytes": {-1, evalIndexOf}, "$indexOfCP": {-1, evalIndexOf},
	}
	addMoreOperators(operators)
}

func compileOperator(name string, arg bson.RawValue, vars scope) (expr, error) {
	switch name {
	case "$literal":
		return literalExpr{arg}, nil
	case "$cond":
		return compileCond(arg, vars)
	case "$ifNull":
		return compileIfNull(arg, vars)
	case "$and", "$or":
		return compileAndOr(name, arg, vars)
	case "$let":
		return compileLet(arg, vars)
	case "$map", "$filter":
		return compileMapFilter(name, arg, vars)
	case "$getField", "$setField", "$unsetField":
		return compileFieldOp(name, arg, vars)
	case "$dateToString":
		return compileDateToString(arg, vars)
	case "$convert":
		return compileConvert(arg, vars)
	case "$switch":
		return compileSwitch(arg, vars)
	case "$reduce":
		return compileReduce(arg, vars)
	case "$regexMatch", "$regexFind", "$regexFindAll":
		return compileRegexOp(name, arg, vars)
	case "$trim", "$ltrim", "$rtrim":
		return compileTrim(name, arg, vars)
	case "$firstN", "$lastN", "$maxN", "$minN":
		return compileNExpr(name, arg, vars)
	case "$replaceOne", "$replaceAll":
		return compileReplace(name, arg, vars)
	case "$dateAdd", "$dateSubtract":
		return compileDateAdd(name, arg, vars)
	case "$dateDiff":
		return compileDateDiff(arg, vars)
	case "$dateTrunc":
		return compileDateTrunc(arg, vars)
	case "$sortArray":
		return compileSortArray(arg, vars)
	case "$zip":
		return compileZip(arg, vars)
	}
	if datePartNames[name] {
		return compileDatePart(name, arg, vars)
	}
	op, ok := operators[name]
	if !ok {
		return nil, mongoerr.New(mongoerr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
	}
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	if op.arity >= 0 && len(args) != op.arity {
		return nil, mongoerr.New(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, op.arity, len(args))
	}
	// The array accumulators take one array argument or several values.
	return &opExpr{name: name, args: args, fn: op.fn}, nil
}

// compileArgs compiles an operator's arguments: an array literal gives
// one argument per element, anything else is a single argument.
func compileArgs(arg bson.RawValue, vars scope) ([]expr, error) {
	if arg.Type != bson.TypeArray {
		e, err := compileExpr(arg, vars)
		if err != nil {
			return nil, err
		}
		return []expr{e}, nil
	}
	var out []expr
	for _, v := range arrayValues(arg.Value) {
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func compileCond(arg bson.RawValue, vars scope) (expr, error) {
	var ifE, thenE, elseE expr
	switch arg.Type {
	case bson.TypeArray:
		args, err := compileArgs(arg, vars)
		if err != nil {
			return nil, err
		}
		if len(args) != 3 {
			return nil, mongoerr.New(16020, "Expression $cond takes exactly 3 arguments. %d were passed in.", len(args))
		}
		ifE, thenE, elseE = args[0], args[1], args[2]
	case bson.TypeEmbeddedDocument:
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
			case "if":
				ifE = e
			case "then":
				thenE = e
			case "else":
				elseE = e
			default:
				return nil, mongoerr.New(17083, "Unrecognized parameter to $cond: %s", k)
			}
		}
		switch {
		case ifE == nil:
			return nil, mongoerr.New(17080, "Missing 'if' parameter to $cond")
		case thenE == nil:
			return nil, mongoerr.New(17081, "Missing 'then' parameter to $cond")
		case elseE == nil:
			return nil, mongoerr.New(17082, "Missing 'else' parameter to $cond")
		}
	default:
		return nil, mongoerr.New(16020, "Expression $cond takes exactly 3 arguments. 1 were passed in.")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		v, err := ifE.eval(c)
		if err != nil {
			return missing, err
		}
		if truthy(v) {
			return thenE.eval(c)
		}
		return elseE.eval(c)
	}}, nil
}

func compileIfNull(arg bson.RawValue, vars scope) (expr, error) {
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, mongoerr.New(1257300, "$ifNull needs at least two arguments, had: %d", len(args))
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for i, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return missing, err
			}
			if i == len(args)-1 || (v.Type != 0 && v.Type != bson.TypeNull && v.Type != bson.TypeUndefined) {
				return v, nil
			}
		}
		return nullValue, nil
	}}, nil
}

func compileAndOr(name string, arg bson.RawValue, vars scope) (expr, error) {
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	isAnd := name == "$and"
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for _, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return missing, err
			}
			if truthy(v) != isAnd {
				return vBool(!isAnd), nil
			}
		}
		return vBool(isAnd), nil
	}}, nil
}

func compileLet(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(16874, "$let only supports an object as its argument")
	}
	if err := checkParams("$let", arg.Value, 16875, "vars", "in"); err != nil {
		return nil, err
	}
	varsDoc, in := lookup(arg.Value, "vars"), lookup(arg.Value, "in")
	switch {
	case varsDoc.Type == 0:
		return nil, mongoerr.New(16876, "Missing 'vars' parameter to $let")
	case in.Type == 0:
		return nil, mongoerr.New(16877, "Missing 'in' parameter to $let")
	case varsDoc.Type != bson.TypeEmbeddedDocument:
		return nil, mongoerr.New(10065, "invalid parameter: expected an object (vars)")
	}
	var names []string
	var vals []expr
	it := iterDoc(varsDoc.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		if !isVarName(string(k)) {
			return nil, mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", k)
		}
		names = append(names, string(k))
		vals = append(vals, e)
	}
	body, err := compileExpr(in, append(append(scope{}, vars...), names...))
	if err != nil {
		return nil, err
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		inner := c
		for i, n := range names {
			v, err := vals[i].eval(c)
			if err != nil {
				return missing, err
			}
			inner = inner.with(n, v)
		}
		return body.eval(inner)
	}}, nil
}

// checkParams refuses a field of an operator's argument document that is
// not one of allowed: "Unrecognized parameter to $op: name".
func checkParams(op string, doc bson.Raw, code int32, allowed ...string) error {
	it := iterDoc(doc)
	for {
		k, _, ok := it.next()
		if !ok {
			return nil
		}
		known := false
		for _, a := range allowed {
			known = known || string(k) == a
		}
		if !known {
			return mongoerr.New(code, "Unrecognized parameter to %s: %s", op, k)
		}
	}
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

func isNullish(v bson.RawValue) bool {
	return v.Type == 0 || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined
}

func evalAdd(name string, args []bson.RawValue) (bson.RawValue, error) {
	acc := vInt32(0)
	var date *int64
	for _, a := range args {
		switch {
		case isNullish(a):
			return nullValue, nil
		case a.Type == bson.TypeDateTime:
			if date != nil {
				return missing, mongoerr.New(16612, "only one date allowed in an $add expression")
			}
			d := asInt64(a)
			date = &d
		case isNumeric(a.Type):
			acc = arith(opAdd, acc, a)
		default:
			return missing, mongoerr.New(16554, "$add only supports numeric or date types, not %s", typeName(a.Type))
		}
	}
	if date != nil {
		return vDate(*date + roundMillis(acc)), nil
	}
	return acc, nil
}

func roundMillis(v bson.RawValue) int64 {
	if v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64 {
		return asInt64(v)
	}
	return int64(math.RoundToEven(asFloat(v)))
}

func evalSubtract(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	switch {
	case isNullish(a) || isNullish(b):
		return nullValue, nil
	case isNumeric(a.Type) && isNumeric(b.Type):
		return arith(opSub, a, b), nil
	case a.Type == bson.TypeDateTime && b.Type == bson.TypeDateTime:
		return vInt64(asInt64(a) - asInt64(b)), nil
	case a.Type == bson.TypeDateTime && isNumeric(b.Type):
		return vDate(asInt64(a) - roundMillis(b)), nil
	}
	return missing, mongoerr.New(16556, "can't $subtract %s from %s", typeName(b.Type), typeName(a.Type))
}

func evalMultiply(_ string, args []bson.RawValue) (bson.RawValue, error) {
	acc := vInt32(1)
	for _, a := range args {
		switch {
		case isNullish(a):
			return nullValue, nil
		case isNumeric(a.Type):
			acc = arith(opMul, acc, a)
		default:
			return missing, mongoerr.New(16555, "$multiply only supports numeric types, not %s", typeName(a.Type))
		}
	}
	return acc, nil
}

func evalDivide(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nullValue, nil
	}
	if !isNumeric(a.Type) || !isNumeric(b.Type) {
		return missing, mongoerr.New(16609, "$divide only supports numeric types, not %s and %s", typeName(a.Type), typeName(b.Type))
	}
	if Compare(b, vInt32(0)) == 0 {
		return missing, mongoerr.New(mongoerr.BadValue, "can't $divide by zero")
	}
	if a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128 {
		return decimalDivide(a, b), nil
	}
	return vDouble(asFloat(a) / asFloat(b)), nil
}

func evalMod(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nullValue, nil
	}
	if !isNumeric(a.Type) || !isNumeric(b.Type) {
		return missing, mongoerr.New(16611, "$mod only supports numeric types, not %s and %s", typeName(a.Type), typeName(b.Type))
	}
	if Compare(b, vInt32(0)) == 0 {
		return missing, mongoerr.New(16610, "can't $mod by zero")
	}
	switch {
	case a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128:
		return vDecimal(decimalFromFloat(math.Mod(asFloat(a), asFloat(b)))), nil
	case a.Type == bson.TypeDouble || b.Type == bson.TypeDouble:
		return vDouble(math.Mod(asFloat(a), asFloat(b))), nil
	}
	x, y := asInt64(a), asInt64(b)
	r := int64(0)
	if y != -1 {
		r = x % y
	}
	if a.Type == bson.TypeInt32 && b.Type == bson.TypeInt32 {
		return vInt32(int32(r)), nil
	}
	return vInt64(r), nil
}

func evalAbs(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a := args[0]
	switch a.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return nullValue, nil
	case bson.TypeInt32:
		i := asInt64(a)
		if i < 0 {
			i = -i
		}
		if i > math.MaxInt32 {
			return vInt64(i), nil
		}
		return vInt32(int32(i)), nil
	case bson.TypeInt64:
		i := asInt64(a)
		if i == math.MinInt64 {
			return missing, mongoerr.New(28680, "can't take $abs of long long min")
		}
		if i < 0 {
			i = -i
		}
		return vInt64(i), nil
	case bson.TypeDouble:
		return vDouble(math.Abs(asFloat(a))), nil
	case bson.TypeDecimal128:
		if Compare(a, vInt32(0)) < 0 {
			return arith(opMul, a, vInt32(-1)), nil
		}
		return a, nil
	}
	return missing, mongoerr.New(28765, "$abs only supports numeric types, not %s", typeName(a.Type))
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

func evalCmp(name string, args []bson.RawValue) (bson.RawValue, error) {
	c := Compare(args[0], args[1])
	switch name {
	case "$eq":
		return vBool(c == 0), nil
	case "$ne":
		return vBool(c != 0), nil
	case "$gt":
		return vBool(c > 0), nil
	case "$gte":
		return vBool(c >= 0), nil
	case "$lt":
		return vBool(c < 0), nil
	case "$lte":
		return vBool(c <= 0), nil
	}
	return vInt32(int32(c)), nil
}

func evalNot(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vBool(!truthy(args[0])), nil
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

func evalType(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vString(typeName(args[0].Type)), nil
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

// evalArrayAccumulator is the expression form of $sum/$avg/$min/$max:
// over the elements of a single array argument, or over the arguments.
func evalArrayAccumulator(name string, args []bson.RawValue) (bson.RawValue, error) {
	vals := args
	if len(args) == 1 && args[0].Type == bson.TypeArray {
		vals = arrayValues(args[0].Value)
	}
	acc := newAccumulator(name)
	for _, v := range vals {
		acc.add(v)
	}
	return acc.result(), nil
}
