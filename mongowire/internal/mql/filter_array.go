package mql

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Array query operators: $all, $elemMatch, $size.

type sizeOp struct{ n int }

func (o *sizeOp) test(v bson.RawValue, expanded bool) (bool, int) {
	return !expanded && v.Type == bson.TypeArray && arrayLen(v.Value) == o.n, -1
}

// elemMatchOp matches an array with at least one element satisfying sub
// (query form: sub is a filter over element documents) or, in value form,
// the predicates of sub applied to the element itself.
type elemMatchOp struct {
	sub       node
	valueForm bool
}

func (o *elemMatchOp) test(v bson.RawValue, expanded bool) (bool, int) {
	if expanded || v.Type != bson.TypeArray {
		return false, -1
	}
	it := iterDoc(v.Value)
	for i := 0; ; i++ {
		_, e, ok := it.next()
		if !ok {
			return false, -1
		}
		if o.valueForm {
			if o.sub.match(wrapValue(e), nil) {
				return true, i
			}
			continue
		}
		// Query form: documents, and arrays seen as documents keyed "0", "1"...
		if (e.Type == bson.TypeEmbeddedDocument || e.Type == bson.TypeArray) && o.sub.match(e.Value, nil) {
			return true, i
		}
	}
}

// wrapValue returns the document {"": v}, so that a filter compiled over
// the field "" can test a bare value.
func wrapValue(v bson.RawValue) bson.Raw {
	d := newDoc(len(v.Value) + 8)
	d.add("", v)
	return d.done()
}

func parseSizeOp(path, _ string, v bson.RawValue, _ int) (node, error) {
	n, err := parseSize(v)
	if err != nil {
		return nil, err
	}
	return newFieldNode(path, &sizeOp{n: n}), nil
}

// parseSize parses the argument of $size as mongod does
// (BSONElement::parseIntegerElementToNonNegativeInt): a number with an
// integral value from 0 to 2^31-1.
func parseSize(v bson.RawValue) (int, error) {
	fail := func(reason string) error {
		return mongoerr.New(mongoerr.BadValue, "Failed to parse $size. %s$size: %s", reason, shortString(v))
	}
	if !isNumeric(v.Type) {
		return 0, fail("Expected a number in: ")
	}
	var n int64
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		n = asInt64(v)
	default:
		f := asFloat(v)
		switch {
		case math.IsNaN(f):
			return 0, fail("Expected an integer, but found NaN in: ")
		case f >= 0x1p63 || f < -0x1p63:
			return 0, fail("Cannot represent as a 64-bit integer: ")
		case f != math.Trunc(f):
			return 0, fail("Expected an integer: ")
		}
		n = int64(f)
	}
	switch {
	case n < 0:
		return 0, fail("Expected a positive number in: ")
	case n > math.MaxInt32:
		return 0, fail("Cannot represent as a 32-bit integer: ")
	}
	return int(n), nil
}

func parseAllOp(path, _ string, v bson.RawValue, depth int) (node, error) {
	return parseAll(path, v, depth)
}

func parseAll(path string, v bson.RawValue, depth int) (node, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "$all needs an array")
	}
	elems := arrayValues(v.Value)
	if len(elems) == 0 {
		return constNode(false), nil
	}
	var nodes andNode
	firstElemMatch := isElemMatchDoc(elems[0])
	for _, e := range elems {
		if firstElemMatch != isElemMatchDoc(e) && firstElemMatch {
			return nil, mongoerr.New(mongoerr.BadValue, "$all/$elemMatch has to be consistent")
		}
		if isOperatorDoc(e) {
			it := iterDoc(e.Value)
			k, arg, _ := it.next()
			// Only a list that starts with $elemMatch holds operators.
			if !firstElemMatch || string(k) != "$elemMatch" {
				return nil, mongoerr.New(mongoerr.BadValue, "no $ expressions in $all")
			}
			op, err := parseElemMatch(arg, depth)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, newFieldNode(path, op))
			continue
		}
		if e.Type == bson.TypeRegex {
			p, o, _ := e.RegexOK()
			op, err := newRegexOp(p, o)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, newFieldNode(path, op))
			continue
		}
		nodes = append(nodes, newFieldNode(path, newEqOp(e)))
	}
	return nodes, nil
}

func parseElemMatchOp(path, _ string, v bson.RawValue, depth int) (node, error) {
	op, err := parseElemMatch(v, depth)
	if err != nil {
		return nil, err
	}
	return newFieldNode(path, op), nil
}

func parseElemMatch(v bson.RawValue, depth int) (*elemMatchOp, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.BadValue, "$elemMatch needs an Object")
	}
	if isOperatorDoc(v) && !isLogicalDoc(v.Value) {
		// Value form: {$elemMatch: {$gt: 1, $lt: 5}} tests each element.
		n, err := parseOperators("", v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		return &elemMatchOp{sub: n, valueForm: true}, nil
	}
	nodes, err := parseFilterDoc(v.Value, depth+1)
	if err != nil {
		return nil, err
	}
	var sub node = andNode(nodes)
	if len(nodes) == 1 {
		sub = nodes[0]
	}
	return &elemMatchOp{sub: sub}, nil
}

func isElemMatchDoc(v bson.RawValue) bool {
	if v.Type != bson.TypeEmbeddedDocument {
		return false
	}
	it := iterDoc(v.Value)
	k, _, _ := it.next()
	return string(k) == "$elemMatch"
}
