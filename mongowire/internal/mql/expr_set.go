package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Set expressions over arrays: $setUnion, $setIntersection,
// $setDifference, $setEquals, $setIsSubset, $anyElementTrue,
// $allElementsTrue.

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
