package mql

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Element query operators: $exists, $type.

type existsOp struct{}

func (existsOp) test(v bson.RawValue, _ bool) (bool, int) { return v.Type != 0, -1 }

type typeOp struct {
	types  []bson.Type
	number bool
}

func (o *typeOp) test(v bson.RawValue, _ bool) (bool, int) {
	if v.Type == 0 {
		return false, -1
	}
	if o.number && isNumeric(v.Type) {
		return true, -1
	}
	for _, t := range o.types {
		if t == v.Type {
			return true, -1
		}
	}
	return false, -1
}

func parseExists(path, _ string, v bson.RawValue, _ int) (node, error) {
	if truthy(v) {
		return newFieldNode(path, existsOp{}), nil
	}
	return notNode{newFieldNode(path, existsOp{})}, nil
}

func parseTypeOp(path, _ string, v bson.RawValue, _ int) (node, error) {
	op, err := parseType(v)
	if err != nil {
		return nil, err
	}
	return newFieldNode(path, op), nil
}

func parseType(v bson.RawValue) (*typeOp, error) {
	op := &typeOp{}
	add := func(e bson.RawValue) error {
		switch {
		case e.Type == bson.TypeString:
			name := str(e)
			if name == "number" {
				op.number = true
				return nil
			}
			t, ok := typeNames[name]
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "Unknown type name alias: %s", name)
			}
			op.types = append(op.types, t)
		case isNumeric(e.Type):
			f := asFloat(e)
			if f != math.Trunc(f) {
				return mongoerr.New(mongoerr.BadValue, "Invalid numerical type code: %s", shortString(e))
			}
			code := int(f)
			switch {
			case code == -1:
				op.types = append(op.types, bson.TypeMinKey)
			case code == 127:
				op.types = append(op.types, bson.TypeMaxKey)
			case code >= 1 && code <= 19:
				op.types = append(op.types, bson.Type(code))
			default:
				return mongoerr.New(mongoerr.BadValue, "Invalid numerical type code: %d", code)
			}
		default:
			return mongoerr.New(mongoerr.TypeMismatch, "type must be represented as a number or a string")
		}
		return nil
	}
	if v.Type == bson.TypeArray {
		for _, e := range arrayValues(v.Value) {
			if err := add(e); err != nil {
				return nil, err
			}
		}
		if len(op.types) == 0 && !op.number {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$type must match at least one type")
		}
		return op, nil
	}
	return op, add(v)
}
