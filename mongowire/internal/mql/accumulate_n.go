package mql

import (
	"math"
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// The accumulators that take a specification document rather than one
// expression: $firstN, $lastN, $maxN, $minN ({n, input}) and $top,
// $bottom, $topN, $bottomN ({[n,] sortBy, output}), following mongod's
// accumulator_multi.cpp; and $stdDevPop/$stdDevSamp.

// nSpec is a parsed specification of an accumulator of accumulators
// without a new function.
type nSpec struct {
	op     string
	n      *Expr // nil for $top and $bottom (n is 1)
	input  *Expr // input or output
	sortBy *Sort // $top/$bottom family only
}

// compileNAccumulator parses the specification of op, an accumulator of
// accumulators without a new function, with mongod's codes and messages.
func compileNAccumulator(op string, arg bson.RawValue, vars scope) (*nSpec, error) {
	s := &nSpec{op: op}
	topBottom := op == "$top" || op == "$bottom" || op == "$topN" || op == "$bottomN"
	single := op == "$top" || op == "$bottom"
	if arg.Type != bson.TypeEmbeddedDocument {
		code := int32(5787900) // $minN, $maxN
		switch {
		case topBottom:
			code = 5788001
		case op == "$firstN" || op == "$lastN":
			code = 5787801
		}
		return nil, mongoerr.New(code, "specification must be an object; found %s: %s", op, shortString(arg))
	}
	var sortBy bson.RawValue
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		field := string(k)
		var err error
		switch {
		case field == "n" && !single:
			s.n, err = compileSpecExpr(v, vars)
		case field == "input" && !topBottom, field == "output" && topBottom:
			s.input, err = compileSpecExpr(v, vars)
		case field == "sortBy" && topBottom:
			sortBy = v
		case topBottom:
			return nil, mongoerr.New(5788002, "Unknown argument to %s '%s'", op, field)
		default:
			return nil, mongoerr.New(5787901, "Unknown argument for 'n' operator: %s", field)
		}
		if err != nil {
			return nil, err
		}
	}
	if !topBottom {
		switch {
		case s.n == nil:
			return nil, mongoerr.New(5787906, "Missing value for 'n'")
		case s.input == nil:
			return nil, mongoerr.New(5787907, "Missing value for 'input'")
		}
		return s, nil
	}
	switch {
	case s.n == nil && !single:
		return nil, mongoerr.New(5788003, "Missing value for 'n'")
	case s.input == nil:
		return nil, mongoerr.New(5788004, "Missing value for 'output'")
	case sortBy.Type == 0:
		return nil, mongoerr.New(5788005, "Missing value for 'sortBy'")
	case sortBy.Type != bson.TypeEmbeddedDocument:
		return nil, mongoerr.New(10065, "invalid parameter: expected an object (sortBy)")
	case arrayLen(sortBy.Value) == 0:
		return nil, mongoerr.New(9657900, "Value for 'sortBy' must be a non-empty object")
	}
	srt, err := CompileSort(sortBy.Value)
	if err != nil {
		return nil, err
	}
	s.sortBy = srt
	return s, nil
}

func compileSpecExpr(v bson.RawValue, vars scope) (*Expr, error) {
	e, err := compileExpr(v, vars)
	if err != nil {
		return nil, err
	}
	return &Expr{e: e}, nil
}

// validateN checks an evaluated n as mongod's AccumulatorN::validateN.
func validateN(v bson.RawValue) (int, error) {
	if !isNumeric(v.Type) {
		return 0, mongoerr.New(5787902, "Value for 'n' must be of integral type, but found %s", shortString(v))
	}
	f := asFloat(v)
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, mongoerr.New(5787903, "Value for 'n' must be of integral type, but found %s", shortString(v))
	}
	n := int64(f)
	if v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64 {
		n = asInt64(v)
	}
	if n <= 0 {
		return 0, mongoerr.New(5787908, "'n' must be greater than 0, found %d", n)
	}
	return int(min(n, math.MaxInt32)), nil
}

// newAcc returns a fresh accumulator for one group; root is what n is
// evaluated against ({_id: <group key>} in $group, the current document
// in the expression forms).
func (s *nSpec) newAcc(c *evalCtx) (accumulator, error) {
	n := 1
	if s.n != nil {
		v, err := s.n.evalIn(c)
		if err != nil {
			return nil, err
		}
		if n, err = validateN(v); err != nil {
			return nil, err
		}
	}
	switch s.op {
	case "$firstN", "$lastN":
		return &firstLastNAcc{n: n, last: s.op == "$lastN"}, nil
	case "$maxN", "$minN":
		return &minMaxNAcc{n: n, max: s.op == "$maxN"}, nil
	}
	return &topBottomAcc{sort: s.sortBy, n: n, bottom: s.op == "$bottom" || s.op == "$bottomN", single: s.op == "$top" || s.op == "$bottom"}, nil
}

// compileNExpr is the expression form of $firstN, $lastN, $maxN and
// $minN: {n, input} where input evaluates to an array.
func compileNExpr(name string, arg bson.RawValue, vars scope) (expr, error) {
	s, err := compileNAccumulator(name, arg, vars)
	if err != nil {
		return nil, err
	}
	compares := name != "$firstN" && name != "$lastN"
	return lazyExpr{fn: func(c *evalCtx) (bson.RawValue, error) {
		if compares && c.coll != nil {
			return missing, collatedExprRefused(name)
		}
		acc, err := s.newAcc(c)
		if err != nil {
			return missing, err
		}
		in, err := s.input.evalIn(c)
		if err != nil {
			return missing, err
		}
		if in.Type != bson.TypeArray {
			return missing, mongoerr.New(5788200, "Input must be an array")
		}
		for _, v := range arrayValues(in.Value) {
			acc.add(v)
		}
		return acc.result(), nil
	}}, nil
}

// firstLastNAcc keeps the first or last n values; missing becomes null.
type firstLastNAcc struct {
	n    int
	last bool
	vals []bson.RawValue
}

func (a *firstLastNAcc) add(v bson.RawValue) {
	if v.Type == 0 {
		v = nullValue
	}
	if len(a.vals) == a.n {
		if !a.last {
			return
		}
		a.vals = append(a.vals[:0], a.vals[1:]...)
	}
	a.vals = append(a.vals, v)
}

func (a *firstLastNAcc) result() bson.RawValue { return vArray(a.vals) }

// minMaxNAcc keeps the n smallest or largest values, ignoring null,
// missing and undefined; the result is ordered best first.
type minMaxNAcc struct {
	n    int
	max  bool
	vals []bson.RawValue // sorted best first
}

func (a *minMaxNAcc) better(x, y bson.RawValue) bool {
	c := Compare(x, y)
	if a.max {
		return c > 0
	}
	return c < 0
}

func (a *minMaxNAcc) add(v bson.RawValue) {
	if isNullish(v) {
		return
	}
	if len(a.vals) == a.n {
		if !a.better(v, a.vals[a.n-1]) {
			return
		}
		a.vals = a.vals[:a.n-1]
	}
	i := sort.Search(len(a.vals), func(i int) bool { return a.better(v, a.vals[i]) })
	a.vals = slices.Insert(a.vals, i, v)
}

func (a *minMaxNAcc) result() bson.RawValue { return vArray(a.vals) }

// docAccumulator is an accumulator that also sees the document each
// value came from: $top and $bottom rank values by their documents.
type docAccumulator interface {
	addDoc(v bson.RawValue, doc bson.Raw)
}

type rankedValue struct {
	doc bson.Raw
	out bson.RawValue
}

// topBottomAcc keeps the outputs of the n first ($top) or last ($bottom)
// documents in sort order. On ties the value seen first is kept, as
// mongod does; the result is in sort order.
type topBottomAcc struct {
	sort   *Sort
	n      int
	bottom bool
	single bool
	items  []rankedValue
}

func (a *topBottomAcc) add(v bson.RawValue) { a.addDoc(v, nil) }

func (a *topBottomAcc) addDoc(v bson.RawValue, doc bson.Raw) {
	if v.Type == 0 {
		v = nullValue
	}
	if len(a.items) == a.n {
		if a.bottom {
			if a.sort.Compare(doc, a.items[0].doc) <= 0 {
				return
			}
			a.items = append(a.items[:0], a.items[1:]...)
		} else {
			if a.sort.Compare(a.items[a.n-1].doc, doc) <= 0 {
				return
			}
			a.items = a.items[:a.n-1]
		}
	}
	i := sort.Search(len(a.items), func(i int) bool { return a.sort.Compare(a.items[i].doc, doc) > 0 })
	a.items = slices.Insert(a.items, i, rankedValue{doc: doc, out: v})
}

func (a *topBottomAcc) result() bson.RawValue {
	if a.single {
		if len(a.items) == 0 {
			return nullValue
		}
		return a.items[0].out
	}
	vals := make([]bson.RawValue, len(a.items))
	for i, it := range a.items {
		vals[i] = it.out
	}
	return vArray(vals)
}

// stdDevAcc is $stdDevPop/$stdDevSamp: Welford's running variance over
// the numeric values, as doubles; non-numbers are ignored.
type stdDevAcc struct {
	samp     bool
	n        int64
	mean, m2 float64
}

func (a *stdDevAcc) add(v bson.RawValue) {
	if !isNumeric(v.Type) {
		return
	}
	x := asFloat(v)
	a.n++
	d := x - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (x - a.mean)
}

func (a *stdDevAcc) result() bson.RawValue {
	switch {
	case a.n == 0, a.samp && a.n == 1:
		return nullValue
	case a.samp:
		return vDouble(math.Sqrt(a.m2 / float64(a.n-1)))
	}
	return vDouble(math.Sqrt(a.m2 / float64(a.n)))
}
