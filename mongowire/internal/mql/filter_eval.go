package mql

import (
	"math"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Evaluation query operators: $regex (with $options), $mod, $expr; and
// the refusals of $text and of $where on a field.

type regexOp struct {
	re      *regexp.Regexp
	pattern string
	options string
}

func (o *regexOp) test(v bson.RawValue, _ bool) (bool, int) {
	switch v.Type {
	case bson.TypeString, bson.TypeSymbol:
		return o.re.Match(stringBytes(v)), -1
	case bson.TypeRegex:
		p, opts, _ := v.RegexOK()
		return p == o.pattern && opts == o.options, -1
	}
	return false, -1
}

func newRegexOp(pattern, options string) (*regexOp, error) {
	re, err := compileRegex(pattern, options, "")
	if err != nil {
		return nil, err
	}
	return &regexOp{re: re, pattern: pattern, options: options}, nil
}

type modOp struct{ d, r int64 }

func (o *modOp) test(v bson.RawValue, _ bool) (bool, int) {
	if !isNumeric(v.Type) {
		return false, -1
	}
	// A double or decimal dividend is truncated; one that is not finite
	// or does not fit in 64 bits matches nothing (ModMatchExpression).
	x, reason := coerceInt64(v)
	if reason != "" {
		return false, -1
	}
	if o.d == -1 {
		return o.r == 0, -1
	}
	return x%o.d == o.r, -1
}

func parseModOp(path, _ string, v bson.RawValue, _ int) (node, error) {
	op, err := parseMod(v)
	if err != nil {
		return nil, err
	}
	return newFieldNode(path, op), nil
}

// parseMod parses {$mod: [divisor, remainder]} in mongod's order
// (parseMOD): each element is checked for presence and type before the
// next, and both are truncated to 64-bit integers as BSONElement's
// tryCoerce does.
func parseMod(v bson.RawValue) (*modOp, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, needs to be an array")
	}
	elems := arrayValues(v.Value)
	var n [2]int64
	for i, what := range []string{"divisor", "remainder"} {
		if len(elems) <= i {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, not enough elements")
		}
		if !isNumeric(elems[i].Type) {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, %s not a number", what)
		}
		x, reason := coerceInt64(elems[i])
		if reason != "" {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, %s value is invalid :: caused by :: %s", what, reason)
		}
		n[i] = x
	}
	if len(elems) > 2 {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, too many elements")
	}
	if n[0] == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "divisor cannot be 0")
	}
	return &modOp{d: n[0], r: n[1]}, nil
}

// coerceInt64 truncates a number toward zero to an int64, or says why it
// cannot, in the words of mongod's BSONElement::tryCoerce.
func coerceInt64(v bson.RawValue) (int64, string) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return asInt64(v), ""
	}
	f := asFloat(v)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, "Unable to coerce NaN/Inf to integral type"
	case f >= 0x1p63 || f < -0x1p63:
		return 0, "Out of bounds coercing to integral value"
	}
	return int64(f), ""
}

type exprMatchNode struct {
	e    *Expr
	coll *Collation // its comparisons follow it (filter_collation.go)
}

func (n exprMatchNode) match(doc bson.Raw, _ *int) bool {
	v, err := n.e.e.eval(&evalCtx{root: doc, current: doc, now: time.Now(), coll: n.coll})
	return err == nil && truthy(v)
}

// parseExprMatch parses {$expr: <aggregation expression>}.
func parseExprMatch(_ string, v bson.RawValue, _ int) (node, error) {
	e, err := CompileExpr(v)
	if err != nil {
		return nil, err
	}
	return exprMatchNode{e: e}, nil
}

// parseText refuses $text: no collection here has a text index.
func parseText(string, bson.RawValue, int) (node, error) {
	return nil, mongoerr.New(mongoerr.IndexNotFound, "text index required for $text query")
}

func parseFieldWhere(string, string, bson.RawValue, int) (node, error) {
	return nil, mongoerr.New(mongoerr.BadValue, "$where cannot be applied to a field")
}
