package mql

import (
	"bytes"
	"regexp"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Comparison query operators: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin.

type eqOp struct {
	v    bson.RawValue
	null bool
	// Under a collation, v holds collation keys (the value as given is
	// orig) and each tested value is transformed the same way.
	orig bson.RawValue
	coll *Collation
}

func (o *eqOp) test(v bson.RawValue, _ bool) (bool, int) {
	if o.null {
		return isNullOrMissing(v), -1
	}
	if o.coll != nil {
		v = o.coll.Transform(v)
	}
	if v.Type == o.v.Type && bytes.Equal(v.Value, o.v.Value) {
		return true, -1
	}
	return TypeBracket(v.Type) == TypeBracket(o.v.Type) && Compare(v, o.v) == 0, -1
}

// isNullOrMissing reports whether v is what a query for null matches in
// MongoDB 7.0: null, a missing field, or the deprecated undefined. (The
// 8.0 compatibility notes, "Compatibility Changes in MongoDB 8.0", say
// that before 8.0 {f: null} also matched undefined values and arrays
// holding undefined, for $eq, $in and $lookup alike.)
func isNullOrMissing(v bson.RawValue) bool {
	return v.Type == 0 || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined
}

type cmpOp struct {
	name string // $gt $gte $lt $lte
	v    bson.RawValue
	coll *Collation // as in eqOp
}

func (o *cmpOp) test(v bson.RawValue, _ bool) (bool, int) {
	if o.coll != nil {
		v = o.coll.Transform(v)
	}
	switch o.v.Type {
	case bson.TypeNull:
		if o.name == "$gte" || o.name == "$lte" {
			return isNullOrMissing(v), -1
		}
		return false, -1
	case bson.TypeMinKey, bson.TypeMaxKey:
		if v.Type == 0 {
			return false, -1
		}
	default:
		if v.Type == 0 || TypeBracket(v.Type) != TypeBracket(o.v.Type) {
			return false, -1
		}
		if isNaN(o.v) || isNaN(v) {
			return isNaN(o.v) && isNaN(v) && (o.name == "$gte" || o.name == "$lte"), -1
		}
	}
	c := Compare(v, o.v)
	switch o.name {
	case "$gt":
		return c > 0, -1
	case "$gte":
		return c >= 0, -1
	case "$lt":
		return c < 0, -1
	}
	return c <= 0, -1
}

type inOp struct {
	vals    []bson.RawValue
	res     []*regexp.Regexp
	hasNull bool
	set     map[string]struct{} // keys of vals, for long lists
	orig    []bson.RawValue     // vals as given, when a collation made vals keys
	coll    *Collation          // as in eqOp
}

// inSetMin is the list length from which $in hashes its values.
const inSetMin = 16

func (o *inOp) test(v bson.RawValue, _ bool) (bool, int) {
	if o.hasNull && isNullOrMissing(v) {
		return true, -1
	}
	if v.Type == 0 {
		return false, -1
	}
	raw := v
	if o.coll != nil {
		v = o.coll.Transform(v)
	}
	if o.set != nil {
		var buf [64]byte
		_, ok := o.set[string(appendKey(buf[:0], v))]
		if ok {
			return true, -1
		}
		return o.testRegex(raw), -1
	}
	for _, w := range o.vals {
		if w.Type == v.Type && bytes.Equal(w.Value, v.Value) {
			return true, -1
		}
		if TypeBracket(w.Type) == TypeBracket(v.Type) && Compare(v, w) == 0 {
			return true, -1
		}
	}
	return o.testRegex(raw), -1
}

func (o *inOp) testRegex(v bson.RawValue) bool {
	if len(o.res) > 0 && (v.Type == bson.TypeString || v.Type == bson.TypeSymbol) {
		s := stringBytes(v)
		for _, re := range o.res {
			if re.Match(s) {
				return true
			}
		}
	}
	return false
}

func newEqOp(v bson.RawValue) *eqOp {
	return &eqOp{v: v, null: v.Type == bson.TypeNull}
}

func parseEq(path, _ string, v bson.RawValue, _ int) (node, error) {
	if v.Type == bson.TypeUndefined {
		return nil, errUndefinedOperand
	}
	return newFieldNode(path, newEqOp(v)), nil
}

func parseNe(path, _ string, v bson.RawValue, _ int) (node, error) {
	if v.Type == bson.TypeUndefined {
		return nil, errUndefinedOperand
	}
	if v.Type == bson.TypeRegex {
		return nil, mongoerr.New(mongoerr.BadValue, "Can't have regex as arg to $ne.")
	}
	return notNode{newFieldNode(path, newEqOp(v))}, nil
}

// parseCmp parses $gt, $gte, $lt and $lte.
func parseCmp(path, name string, v bson.RawValue, _ int) (node, error) {
	if v.Type == bson.TypeUndefined {
		return nil, errUndefinedOperand
	}
	if v.Type == bson.TypeRegex {
		return nil, mongoerr.New(mongoerr.BadValue, "Can't have RegEx as arg to predicate over field '%s'.", path)
	}
	return newFieldNode(path, &cmpOp{name: name, v: v}), nil
}

// parseInNin parses $in and $nin.
func parseInNin(path, name string, v bson.RawValue, _ int) (node, error) {
	op, err := parseIn(name, v)
	if err != nil {
		return nil, err
	}
	if name == "$nin" {
		return notNode{newFieldNode(path, op)}, nil
	}
	return newFieldNode(path, op), nil
}

func parseIn(name string, v bson.RawValue) (*inOp, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "%s needs an array", name)
	}
	op := &inOp{}
	for _, e := range arrayValues(v.Value) {
		switch {
		case e.Type == bson.TypeRegex:
			p, o, _ := e.RegexOK()
			re, err := compileRegex(p, o, "")
			if err != nil {
				return nil, err
			}
			op.res = append(op.res, re)
			// A regex in $in also matches an identical stored regex.
			op.vals = append(op.vals, e)
		case isOperatorDoc(e):
			return nil, mongoerr.New(mongoerr.BadValue, "cannot nest $ under %s", name)
		case e.Type == bson.TypeNull:
			op.hasNull = true
		case e.Type == bson.TypeUndefined:
			return nil, mongoerr.New(mongoerr.BadValue, "InMatchExpression equality cannot be undefined")
		default:
			op.vals = append(op.vals, e)
		}
	}
	if len(op.vals) >= inSetMin {
		op.set = make(map[string]struct{}, len(op.vals))
		for _, v := range op.vals {
			op.set[string(appendKey(nil, v))] = struct{}{}
		}
	}
	return op, nil
}

// errUndefinedOperand is mongod's refusal of the deprecated undefined as
// the operand of an equality or comparison.
var errUndefinedOperand = mongoerr.New(mongoerr.BadValue, "cannot compare to undefined")
