package mql

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// accumulator folds values for $group and for the array forms of
// $sum/$avg/$min/$max.
type accumulator interface {
	add(v bson.RawValue)
	result() bson.RawValue
}

// newAccumulator returns a fresh accumulator for name, an entry of
// accumulators that takes one expression.
func newAccumulator(name string) accumulator {
	op, ok := lookupOperator(accumulators, name)
	if !ok || op.new == nil {
		panic("mql: not a one-expression accumulator: " + name)
	}
	return op.new()
}

// newAccumulatorColl is newAccumulator whose comparisons ($min, $max,
// $addToSet) follow c: they compare collation keys and keep the values.
func newAccumulatorColl(name string, c *Collation) accumulator {
	acc := newAccumulator(name)
	switch a := acc.(type) {
	case *minMaxAcc:
		a.coll = c
	case *setAcc:
		a.coll = c
	}
	return acc
}

// numSum adds numbers without allocating while they stay int32/int64
// (promoting as MongoDB does) or double; decimals fall back to arith.
type numSum struct {
	kind bson.Type // TypeInt32, TypeInt64, TypeDouble or TypeDecimal128
	i    int64
	f    float64
	dec  bson.RawValue
}

func (s *numSum) add(v bson.RawValue) {
	if s.kind == 0 {
		s.kind = bson.TypeInt32
	}
	switch {
	case s.kind == bson.TypeDecimal128 || v.Type == bson.TypeDecimal128:
		s.dec = arith(opAdd, s.value(), v)
		s.kind = bson.TypeDecimal128
	case s.kind == bson.TypeDouble || v.Type == bson.TypeDouble:
		if s.kind != bson.TypeDouble {
			s.f, s.kind = float64(s.i), bson.TypeDouble
		}
		s.f += asFloat(v)
	default:
		x := asInt64(v)
		r := s.i + x
		if (s.i > 0 && x > 0 && r < 0) || (s.i < 0 && x < 0 && r >= 0) {
			s.f, s.kind = float64(s.i)+float64(x), bson.TypeDouble
			return
		}
		s.i = r
		if v.Type == bson.TypeInt64 || r > math.MaxInt32 || r < math.MinInt32 {
			s.kind = bson.TypeInt64
		}
	}
}

func (s *numSum) value() bson.RawValue {
	switch s.kind {
	case bson.TypeDecimal128:
		return s.dec
	case bson.TypeDouble:
		return vDouble(s.f)
	case bson.TypeInt64:
		return vInt64(s.i)
	}
	return vInt32(int32(s.i))
}

type sumAcc struct{ sum numSum }

func (a *sumAcc) add(v bson.RawValue) {
	if isNumeric(v.Type) {
		a.sum.add(v)
	}
}

func (a *sumAcc) result() bson.RawValue { return a.sum.value() }

type avgAcc struct {
	sum numSum
	n   int64
}

func (a *avgAcc) add(v bson.RawValue) {
	if isNumeric(v.Type) {
		a.sum.add(v)
		a.n++
	}
}

func (a *avgAcc) result() bson.RawValue {
	if a.n == 0 {
		return nullValue
	}
	if a.sum.kind == bson.TypeDecimal128 {
		return decimalDivide(a.sum.dec, vInt64(a.n))
	}
	return vDouble(asFloat(a.sum.value()) / float64(a.n))
}

type minMaxAcc struct {
	max  bool
	v    bson.RawValue
	set  bool
	coll *Collation // nil: binary
}

func (a *minMaxAcc) add(v bson.RawValue) {
	if isNullish(v) {
		return
	}
	if !a.set {
		a.v, a.set = v, true
		return
	}
	c := compareColl(a.coll, v, a.v)
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
	coll *Collation // nil: binary
}

func (a *setAcc) add(v bson.RawValue) {
	if v.Type == 0 {
		return
	}
	k := string(appendKey(nil, a.coll.Transform(v)))
	if a.seen[k] {
		return
	}
	a.seen[k] = true
	a.vals = append(a.vals, v)
}

func (a *setAcc) result() bson.RawValue { return vArray(a.vals) }

// evalArrayAccumulator is the expression form of $sum/$avg/$min/$max:
// over the elements of a single array argument, or over the arguments.
func evalArrayAccumulator(name string, args []bson.RawValue) (bson.RawValue, error) {
	return evalArrayAccumulatorColl(name, args, nil)
}

func evalArrayAccumulatorColl(name string, args []bson.RawValue, c *Collation) (bson.RawValue, error) {
	vals := args
	if len(args) == 1 && args[0].Type == bson.TypeArray {
		vals = arrayValues(args[0].Value)
	}
	acc := newAccumulatorColl(name, c)
	for _, v := range vals {
		acc.add(v)
	}
	return acc.result(), nil
}

// mergeAcc merges documents, later fields replacing earlier ones in place.
type mergeAcc struct {
	keys []string
	vals map[string]bson.RawValue
}

func (m *mergeAcc) add(v bson.RawValue) {
	if v.Type != bson.TypeEmbeddedDocument {
		return
	}
	if m.vals == nil {
		m.vals = map[string]bson.RawValue{}
	}
	it := iterDoc(v.Value)
	for {
		k, e, ok := it.next()
		if !ok {
			return
		}
		key := string(k)
		if _, seen := m.vals[key]; !seen {
			m.keys = append(m.keys, key)
		}
		m.vals[key] = e
	}
}

func (m *mergeAcc) result() bson.RawValue {
	d := newDoc(64)
	for _, k := range m.keys {
		d.add(k, m.vals[k])
	}
	return vDoc(d.done())
}
