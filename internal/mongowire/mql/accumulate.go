package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// accumulator folds values for $group and for the array forms of
// $sum/$avg/$min/$max.
type accumulator interface {
	add(v bson.RawValue)
	result() bson.RawValue
}

// accumulatorNames are the $group accumulators this package implements.
var accumulatorNames = map[string]bool{
	"$sum": true, "$avg": true, "$min": true, "$max": true, "$first": true, "$last": true,
	"$push": true, "$addToSet": true, "$count": true,
}

func newAccumulator(name string) accumulator {
	switch name {
	case "$sum", "$count":
		return &sumAcc{sum: vInt32(0)}
	case "$avg":
		return &avgAcc{sum: vInt32(0)}
	case "$min":
		return &minMaxAcc{max: false}
	case "$max":
		return &minMaxAcc{max: true}
	case "$first":
		return &firstAcc{}
	case "$last":
		return &lastAcc{}
	case "$push":
		return &pushAcc{}
	case "$addToSet":
		return &setAcc{seen: map[string]bool{}}
	}
	panic("mql: unknown accumulator " + name)
}

type sumAcc struct{ sum bson.RawValue }

func (a *sumAcc) add(v bson.RawValue) {
	if isNumeric(v.Type) {
		a.sum = arith(opAdd, a.sum, v)
	}
}

func (a *sumAcc) result() bson.RawValue { return a.sum }

type avgAcc struct {
	sum bson.RawValue
	n   int64
}

func (a *avgAcc) add(v bson.RawValue) {
	if isNumeric(v.Type) {
		a.sum = arith(opAdd, a.sum, v)
		a.n++
	}
}

func (a *avgAcc) result() bson.RawValue {
	if a.n == 0 {
		return nullValue
	}
	if a.sum.Type == bson.TypeDecimal128 {
		return decimalDivide(a.sum, vInt64(a.n))
	}
	return vDouble(asFloat(a.sum) / float64(a.n))
}

type minMaxAcc struct {
	max bool
	v   bson.RawValue
	set bool
}

func (a *minMaxAcc) add(v bson.RawValue) {
	if isNullish(v) {
		return
	}
	if !a.set {
		a.v, a.set = v, true
		return
	}
	c := Compare(v, a.v)
	if (a.max && c > 0) || (!a.max && c < 0) {
		a.v = v
	}
}

func (a *minMaxAcc) result() bson.RawValue {
	if !a.set {
		return nullValue
	}
	return a.v
}

type firstAcc struct {
	v   bson.RawValue
	set bool
}

func (a *firstAcc) add(v bson.RawValue) {
	if !a.set {
		a.v, a.set = v, true
	}
}

func (a *firstAcc) result() bson.RawValue {
	if a.v.Type == 0 {
		return nullValue
	}
	return a.v
}

type lastAcc struct{ v bson.RawValue }

func (a *lastAcc) add(v bson.RawValue) { a.v = v }

func (a *lastAcc) result() bson.RawValue {
	if a.v.Type == 0 {
		return nullValue
	}
	return a.v
}

type pushAcc struct{ vals []bson.RawValue }

func (a *pushAcc) add(v bson.RawValue) {
	if v.Type != 0 {
		a.vals = append(a.vals, v)
	}
}

func (a *pushAcc) result() bson.RawValue { return vArray(a.vals) }

type setAcc struct {
	vals []bson.RawValue
	seen map[string]bool
}

func (a *setAcc) add(v bson.RawValue) {
	if v.Type == 0 {
		return
	}
	k := string(appendKey(nil, v))
	if a.seen[k] {
		return
	}
	a.seen[k] = true
	a.vals = append(a.vals, v)
}

func (a *setAcc) result() bson.RawValue { return vArray(a.vals) }
