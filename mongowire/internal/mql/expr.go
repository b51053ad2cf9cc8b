package mql

import (
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
	coll    *Collation               // comparisons follow it (nil: binary)
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
	if c.coll != nil {
		switch underCollation[o.name] {
		case collateArgs:
			for i := range vals {
				vals[i] = c.coll.Transform(vals[i])
			}
		case collateAccumulator:
			return evalArrayAccumulatorColl(o.name, vals, c.coll)
		case refuseCollated:
			return missing, collatedExprRefused(o.name)
		}
	}
	return o.fn(o.name, vals)
}

// How an operator meets a non-simple collation: the comparisons that
// answer a boolean or a position compare collation keys; those that
// return the values compared (which must not become keys) are refused.
const (
	collateArgs = iota + 1
	collateAccumulator
	refuseCollated
)

var underCollation = map[string]int{
	"$eq": collateArgs, "$ne": collateArgs, "$gt": collateArgs, "$gte": collateArgs, "$lt": collateArgs,
	"$lte": collateArgs, "$cmp": collateArgs, "$in": collateArgs, "$indexOfArray": collateArgs,
	"$setEquals": collateArgs, "$setIsSubset": collateArgs,
	"$setUnion": refuseCollated, "$setIntersection": refuseCollated, "$setDifference": refuseCollated,
	"$max": collateAccumulator, "$min": collateAccumulator, "$maxN": refuseCollated, "$minN": refuseCollated,
}

func collatedExprRefused(name string) error {
	return mongoerr.New(mongoerr.CommandNotSupported, "%s with a non-simple collation is not supported by this server", name)
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

// compileOperator compiles {name: arg} with the operator of that name in
// exprOperators: its own compiler, or its evaluator over the compiled
// arguments after an arity check.
func compileOperator(name string, arg bson.RawValue, vars scope) (expr, error) {
	op, ok := lookupOperator(exprOperators, name)
	if !ok {
		return nil, mongoerr.New(mongoerr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
	}
	if op.compile != nil {
		return op.compile(name, arg, vars)
	}
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	if op.arity >= 0 && len(args) != op.arity {
		return nil, mongoerr.New(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, op.arity, len(args))
	}
	// The array accumulators take one array argument or several values.
	return &opExpr{name: name, args: args, fn: op.eval}, nil
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

func isNullish(v bson.RawValue) bool {
	return v.Type == 0 || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined
}

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
