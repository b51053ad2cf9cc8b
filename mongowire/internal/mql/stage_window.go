package mql

import (
	"encoding/binary"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $setWindowFields: {partitionBy, sortBy, output: {field: {<function>:
// <argument>, window: {documents | range: [lower, upper], unit}}}}.
// As mongod, the stage sorts its input by partition then sortBy, and each
// output field is computed over a window of the document's partition.

type windowStage struct {
	partitionBy *Expr // nil: one partition
	sortBy      *Sort // nil: input order
	outputs     []windowOutput
}

// windowOutput is one output field. kind is "" for an accumulator over a
// window, else the function ($rank, $denseRank, $documentNumber, $shift).
type windowOutput struct {
	path []string
	kind string
	acc  groupAcc
	win  windowBounds

	shiftBy      int64
	shiftOutput  *Expr
	shiftDefault bson.RawValue
}

// windowBounds is a documents window (offsets from the current position)
// or a range window (offsets added to the current sortBy value, a date
// moved by unit when unit is set). A bound that is not set is unbounded;
// current on a range bound means the current document's position.
type windowBounds struct {
	isRange            bool
	lowerSet, upperSet bool
	lowerCur, upperCur bool  // range only
	lower, upper       int64 // documents
	lowerV, upperV     bson.RawValue
	unit               string
}

// windowFunctions are the window functions of MongoDB 7.0. The accumulators
// that are not window functions ($mergeObjects) are refused; those not run
// here are refused as unsupported (115).
var windowFunctions = map[string]bool{
	"$addToSet": true, "$avg": true, "$bottom": true, "$bottomN": true, "$count": true,
	"$first": true, "$firstN": true, "$last": true, "$lastN": true, "$max": true, "$maxN": true,
	"$min": true, "$minN": true, "$push": true, "$stdDevPop": true, "$stdDevSamp": true,
	"$sum": true, "$top": true, "$topN": true,
	"$rank": true, "$denseRank": true, "$documentNumber": true, "$shift": true,
	"$covariancePop": false, "$covarianceSamp": false, "$derivative": false,
	"$expMovingAvg": false, "$integral": false, "$linearFill": false, "$locf": false,
}

func compileSetWindowFields(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $setWindowFields stage specification must be an object, found %s", typeName(v.Type))
	}
	s := &windowStage{}
	var output bson.RawValue
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "partitionBy":
			e, err := CompileExpr(f)
			if err != nil {
				return nil, err
			}
			s.partitionBy = e
		case "sortBy":
			if f.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$setWindowFields.sortBy' is the wrong type '%s', expected type 'object'", typeName(f.Type))
			}
			so, err := CompileSort(f.Value)
			if err != nil {
				return nil, err
			}
			if len(so.keys) > 0 {
				s.sortBy = so
			}
		case "output":
			if f.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$setWindowFields.output' is the wrong type '%s', expected type 'object'", typeName(f.Type))
			}
			output = f
		default:
			return nil, mongoerr.New(40415, "BSON field '$setWindowFields.%s' is an unknown field.", k)
		}
	}
	if output.Type == 0 {
		return nil, mongoerr.New(40414, "BSON field '$setWindowFields.output' is missing but a required field")
	}
	oit := iterDoc(output.Value)
	for {
		k, f, ok := oit.next()
		if !ok {
			break
		}
		o, err := s.compileOutput(string(k), f)
		if err != nil {
			return nil, err
		}
		s.outputs = append(s.outputs, o)
	}
	return s, nil
}

func (s *windowStage) compileOutput(name string, f bson.RawValue) (windowOutput, error) {
	parts := strings.Split(name, ".")
	if strings.HasPrefix(name, "$") {
		return windowOutput{}, mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	}
	if err := checkPathParts(parts); err != nil {
		return windowOutput{}, err
	}
	if f.Type != bson.TypeEmbeddedDocument {
		return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "The field '%s' must be an object", name)
	}
	o := windowOutput{path: parts}
	var fn string
	var arg, window bson.RawValue
	it := iterDoc(f.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		key := string(k)
		switch {
		case key == "window":
			window = v
		case fn != "":
			return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "Window function found an unknown argument: %s", key)
		default:
			fn, arg = key, v
		}
	}
	if fn == "" {
		return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "Expected a $-prefixed window function, window")
	}
	run, known := windowFunctions[fn]
	switch {
	case !known && strings.HasPrefix(fn, "$"):
		return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "Unrecognized window function, %s", fn)
	case !known:
		return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "Window function found an unknown argument: %s", fn)
	case !run:
		return windowOutput{}, mongoerr.New(mongoerr.CommandNotSupported, "%s is not supported by this server", fn)
	}
	single := s.sortBy != nil && len(s.sortBy.keys) == 1
	switch fn {
	case "$rank", "$denseRank", "$documentNumber":
		if arg.Type != bson.TypeEmbeddedDocument || arrayLen(arg.Value) != 0 {
			return windowOutput{}, mongoerr.New(5371603, "%s must be specified with '{}' as the value", fn)
		}
		if !single {
			return windowOutput{}, mongoerr.New(5371602, "%s must be specified with a top level sortBy expression with exactly one element", fn)
		}
		if window.Type != 0 {
			return windowOutput{}, mongoerr.New(5371601, "Rank style window functions take no other arguments")
		}
		o.kind = fn
		return o, nil
	case "$shift":
		if err := o.compileShift(arg); err != nil {
			return windowOutput{}, err
		}
		if s.sortBy == nil {
			return windowOutput{}, mongoerr.New(5788603, "$shift requires a sortBy")
		}
		if window.Type != 0 {
			return windowOutput{}, mongoerr.New(mongoerr.FailedToParse, "$shift does not accept a 'window' field")
		}
		o.kind = fn
		return o, nil
	}
	d := newDoc(len(arg.Value) + 16)
	d.add(fn, arg)
	acc, err := compileAccField(parts[len(parts)-1], vDoc(d.done())) // a dotted path is fine here
	if err != nil {
		return windowOutput{}, err
	}
	o.acc = acc
	if window.Type != 0 {
		if o.win, err = s.compileWindow(window); err != nil {
			return windowOutput{}, err
		}
	}
	return o, nil
}

func (o *windowOutput) compileShift(arg bson.RawValue) error {
	if arg.Type != bson.TypeEmbeddedDocument {
		return mongoerr.New(mongoerr.FailedToParse, "Argument to $shift must be an object")
	}
	var haveBy bool
	o.shiftDefault = nullValue
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "output":
			e, err := CompileExpr(v)
			if err != nil {
				return err
			}
			o.shiftOutput = e
		case "by":
			n, ok := integral(v)
			if !ok {
				return mongoerr.New(mongoerr.FailedToParse, "'$shift:by' field must be an integer, but found by: %s. To use $shift, you must specify the 'by' field as a whole number", shortString(v))
			}
			o.shiftBy, haveBy = n, true
		case "default":
			e, err := CompileExpr(v)
			if err != nil {
				return err
			}
			c, ok := e.e.(literalExpr)
			if !ok {
				// A constant expression such as {$add: [1, 2]} folds to one.
				val, err := e.Eval(bson.Raw{5, 0, 0, 0, 0})
				if err != nil || usesFields(v) {
					return mongoerr.New(mongoerr.FailedToParse, "'$shift:default' expression must yield a constant value.")
				}
				c.v = val
			}
			o.shiftDefault = c.v
			if o.shiftDefault.Type == 0 {
				o.shiftDefault = nullValue
			}
		default:
			return mongoerr.New(mongoerr.FailedToParse, "Unknown argument in $shift: %s", k)
		}
	}
	switch {
	case o.shiftOutput == nil:
		return mongoerr.New(mongoerr.FailedToParse, "$shift requires an 'output' expression.")
	case !haveBy:
		return mongoerr.New(mongoerr.FailedToParse, "$shift requires 'by' as an integer value.")
	}
	return nil
}

// usesFields reports whether an expression mentions a field path or a
// variable, so it is not a constant.
func usesFields(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeString:
		return strings.HasPrefix(str(v), "$")
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		it := iterDoc(v.Value)
		for {
			_, e, ok := it.next()
			if !ok {
				return false
			}
			if usesFields(e) {
				return true
			}
		}
	}
	return false
}

func (s *windowStage) compileWindow(w bson.RawValue) (windowBounds, error) {
	var b windowBounds
	if w.Type != bson.TypeEmbeddedDocument {
		return b, mongoerr.New(mongoerr.FailedToParse, "'window' field must be an object")
	}
	var docs, rng, unit bson.RawValue
	it := iterDoc(w.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "documents":
			docs = v
		case "range":
			rng = v
		case "unit":
			unit = v
		default:
			return b, mongoerr.New(mongoerr.FailedToParse, "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field")
		}
	}
	switch {
	case docs.Type != 0 && (rng.Type != 0 || unit.Type != 0):
		return b, mongoerr.New(mongoerr.FailedToParse, "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field")
	case docs.Type != 0:
		return s.documentsWindow(docs)
	case rng.Type != 0:
		return s.rangeWindow(rng, unit)
	case unit.Type != 0:
		return b, mongoerr.New(mongoerr.FailedToParse, "'window' field that specifies 'unit' must also specify 'range'")
	}
	return b, nil // {} is the whole partition
}

// windowPair splits a window's [lower, upper] array.
func windowPair(v bson.RawValue, kind string) (bson.RawValue, bson.RawValue, error) {
	if v.Type != bson.TypeArray || arrayLen(v.Value) != 2 {
		return bson.RawValue{}, bson.RawValue{}, mongoerr.New(mongoerr.FailedToParse, "Window bounds must be a 2-element array: %s: %s", kind, shortString(v))
	}
	vals := arrayValues(v.Value)
	return vals[0], vals[1], nil
}

func boundKeyword(v bson.RawValue) string {
	if v.Type == bson.TypeString {
		return str(v)
	}
	return ""
}

func (s *windowStage) documentsWindow(v bson.RawValue) (windowBounds, error) {
	var b windowBounds
	lo, hi, err := windowPair(v, "documents")
	if err != nil {
		return b, err
	}
	parse := func(x bson.RawValue) (n int64, set bool, err error) {
		switch boundKeyword(x) {
		case "unbounded":
			return 0, false, nil
		case "current":
			return 0, true, nil
		}
		n, ok := integral(x)
		if !ok {
			return 0, false, mongoerr.New(mongoerr.FailedToParse, "Numeric document-based bounds must be an integer: %s", shortString(x))
		}
		return n, true, nil
	}
	if b.lower, b.lowerSet, err = parse(lo); err != nil {
		return b, err
	}
	if b.upper, b.upperSet, err = parse(hi); err != nil {
		return b, err
	}
	switch {
	case !b.lowerSet && !b.upperSet:
		return b, nil // the whole partition needs no order
	case b.lowerSet && b.upperSet && b.lower > b.upper:
		return b, mongoerr.New(5339900, "Lower bound must not exceed upper bound: %s", shortString(v))
	}
	if s.sortBy == nil {
		return b, mongoerr.New(5339901, "Document-based bounds require a sortBy")
	}
	return b, nil
}

func (s *windowStage) rangeWindow(v, unit bson.RawValue) (windowBounds, error) {
	b := windowBounds{isRange: true}
	lo, hi, err := windowPair(v, "range")
	if err != nil {
		return b, err
	}
	if unit.Type != 0 {
		if unit.Type != bson.TypeString || !timeUnits[str(unit)] {
			return b, mongoerr.New(mongoerr.FailedToParse, "unknown time unit value: %s", shortString(unit))
		}
		b.unit = str(unit)
	}
	parse := func(x bson.RawValue) (val bson.RawValue, set, cur bool, err error) {
		switch boundKeyword(x) {
		case "unbounded":
			return bson.RawValue{}, false, false, nil
		case "current":
			return bson.RawValue{}, true, true, nil
		}
		if !isNumeric(x.Type) {
			return bson.RawValue{}, false, false, mongoerr.New(mongoerr.FailedToParse, "Range-based bounds expression must be a number: %s", shortString(x))
		}
		if b.unit != "" {
			if _, ok := integral(x); !ok {
				return bson.RawValue{}, false, false, mongoerr.New(mongoerr.FailedToParse, "With 'unit', range-based bounds must be an integer: %s", shortString(x))
			}
		}
		return x, true, false, nil
	}
	if b.lowerV, b.lowerSet, b.lowerCur, err = parse(lo); err != nil {
		return b, err
	}
	if b.upperV, b.upperSet, b.upperCur, err = parse(hi); err != nil {
		return b, err
	}
	lv, uv := b.lowerV, b.upperV
	if b.lowerCur {
		lv = vInt32(0)
	}
	if b.upperCur {
		uv = vInt32(0)
	}
	if lv.Type != 0 && uv.Type != 0 && Compare(lv, uv) > 0 {
		return b, mongoerr.New(5339900, "Lower bound must not exceed upper bound: %s", shortString(v))
	}
	if s.sortBy == nil || len(s.sortBy.keys) != 1 {
		return b, mongoerr.New(5339902, "Range-based bounds require sortBy a single field")
	}
	if s.sortBy.keys[0].dir != 1 {
		return b, mongoerr.New(8947401, "Range-based bounds require an ascending sortBy")
	}
	return b, nil
}

func (s *windowStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	// Each document's partition as a rank among the partitions' keys, then
	// one sort on (partition, sortBy, position).
	n := len(in)
	part := make([]int, n)
	if s.partitionBy != nil {
		groups := map[string]int{}
		var keys []bson.RawValue
		var key []byte
		for i, d := range in {
			v, err := c.eval(s.partitionBy, d)
			if err != nil {
				return nil, err
			}
			switch v.Type {
			case 0:
				v = nullValue
			case bson.TypeArray:
				return nil, mongoerr.New(5722400, "An expression used to partition cannot evaluate to value of type array")
			}
			key = appendKey(key[:0], v)
			g, ok := groups[string(key)]
			if !ok {
				g = len(keys)
				groups[string(key)] = g
				keys = append(keys, v)
			}
			part[i] = g
		}
		order := make([]int, len(keys))
		for g := range order {
			order[g] = g
		}
		slices.SortFunc(order, func(a, b int) int { return Compare(keys[a], keys[b]) })
		rank := make([]int, len(keys))
		for r, g := range order {
			rank[g] = r
		}
		for i := range part {
			part[i] = rank[part[i]]
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	var sortKeys []bson.RawValue
	if s.sortBy != nil {
		sortKeys = make([]bson.RawValue, n*len(s.sortBy.keys))
		for i, d := range in {
			for j, k := range s.sortBy.keys {
				sortKeys[i*len(s.sortBy.keys)+j] = k.value(d)
			}
		}
	}
	nk := 0
	if s.sortBy != nil {
		nk = len(s.sortBy.keys)
	}
	cmpSort := func(a, b int) int {
		for j, k := range s.sortBy.keys {
			if c := Compare(sortKeys[a*nk+j], sortKeys[b*nk+j]); c != 0 {
				return c * k.dir
			}
		}
		return 0
	}
	if s.partitionBy != nil || s.sortBy != nil {
		// Stable by position: pdqsort with ties broken by index is much
		// faster than a stable merge sort.
		slices.SortFunc(idx, func(a, b int) int {
			if c := cmpInt(part[a], part[b]); c != 0 {
				return c
			}
			if s.sortBy != nil {
				if c := cmpSort(a, b); c != 0 {
					return c
				}
			}
			return cmpInt(a, b)
		})
	}
	// results[k][i] is output k of document i.
	results := make([][]bson.RawValue, len(s.outputs))
	for k := range results {
		results[k] = make([]bson.RawValue, n)
	}
	for start := 0; start < n; {
		end := start + 1
		if s.partitionBy == nil {
			end = n
		}
		for end < n && part[idx[start]] == part[idx[end]] {
			end++
		}
		p := idx[start:end]
		for k, o := range s.outputs {
			vals, err := s.compute(c, o, in, p, sortKeys, nk, cmpSort)
			if err != nil {
				return nil, err
			}
			for j, i := range p {
				results[k][i] = vals[j]
			}
		}
		start = end
	}
	out := make([]bson.Raw, 0, n)
	for _, i := range idx {
		out = append(out, s.setOutputs(in[i], results, i))
	}
	return out, nil
}

// setOutputs sets the output fields of document i. New top-level fields
// are appended to the document's bytes; others go through setField.
func (s *windowStage) setOutputs(d bson.Raw, results [][]bson.RawValue, i int) bson.Raw {
	simple := true
	for _, o := range s.outputs {
		if len(o.path) != 1 || lookup(d, o.path[0]).Type != 0 {
			simple = false
			break
		}
	}
	if simple && len(s.outputs) > 1 {
		seen := map[string]bool{}
		for _, o := range s.outputs {
			if seen[o.path[0]] {
				simple = false
				break
			}
			seen[o.path[0]] = true
		}
	}
	if simple {
		size := len(d)
		for k, o := range s.outputs {
			size += len(o.path[0]) + 2 + len(results[k][i].Value)
		}
		b := make([]byte, 0, size)
		b = append(b, d[:len(d)-1]...)
		for k, o := range s.outputs {
			b = appendElem(b, o.path[0], results[k][i])
		}
		b = append(b, 0)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	root := rawNode(vDoc(d))
	root.load()
	for k, o := range s.outputs {
		setField(root, o.path, results[k][i])
	}
	return root.encodeDoc(make([]byte, 0, len(d)+32))
}

// compute returns the values of output o for the documents of one
// partition, p (positions into in, in window order).
func (s *windowStage) compute(c *runCtx, o windowOutput, in []bson.Raw, p []int, sortKeys []bson.RawValue, nk int, cmpSort func(a, b int) int) ([]bson.RawValue, error) {
	vals := make([]bson.RawValue, len(p))
	switch o.kind {
	case "$documentNumber":
		for j := range p {
			vals[j] = vInt32(int32(j + 1))
		}
		return vals, nil
	case "$rank", "$denseRank":
		rank, dense := 0, 0
		for j := range p {
			if j == 0 || cmpSort(p[j-1], p[j]) != 0 {
				rank, dense = j+1, dense+1
			}
			if o.kind == "$rank" {
				vals[j] = vInt32(int32(rank))
			} else {
				vals[j] = vInt32(int32(dense))
			}
		}
		return vals, nil
	case "$shift":
		for j := range p {
			k := int64(j) + o.shiftBy
			if k < 0 || k >= int64(len(p)) {
				vals[j] = o.shiftDefault
				continue
			}
			v, err := c.eval(o.shiftOutput, in[p[k]])
			if err != nil {
				return nil, err
			}
			if v.Type == 0 {
				v = nullValue
			}
			vals[j] = v
		}
		return vals, nil
	}

	// An accumulator: its input for each document, then folded over each
	// document's window.
	inputs := make([]bson.RawValue, len(p))
	ec := &evalCtx{now: c.now, coll: c.coll}
	for j, i := range p {
		ec.root, ec.current = in[i], in[i]
		v, err := o.acc.e.evalIn(ec)
		if err != nil {
			return nil, err
		}
		inputs[j] = v
	}
	newAcc := func(j int) (accumulator, error) {
		if o.acc.spec == nil {
			return newAccumulator(o.acc.op), nil
		}
		// n of $topN and the like sees the current document.
		d := in[p[j]]
		return o.acc.spec.newAcc(&evalCtx{root: d, current: d, now: c.now, coll: c.coll})
	}
	add := func(a accumulator, k int) {
		if da, ok := a.(docAccumulator); ok {
			da.addDoc(inputs[k], in[p[k]])
			return
		}
		a.add(inputs[k])
	}
	var sortVal func(j int) bson.RawValue
	if o.win.isRange {
		sortVal = func(j int) bson.RawValue { return sortKeys[p[j]*nk] }
		for j := range p {
			if err := checkRangeValue(sortVal(j), o.win.unit); err != nil {
				return nil, err
			}
		}
	}
	bounds := func(j int) (lo, hi int) {
		w := o.win
		lo, hi = 0, len(p)-1
		if !w.isRange {
			if w.lowerSet {
				lo = max(j+int(w.lower), 0)
			}
			if w.upperSet {
				hi = min(j+int(w.upper), len(p)-1)
			}
			return lo, hi
		}
		cur := sortVal(j)
		if w.lowerSet {
			if w.lowerCur {
				lo = j
			} else {
				// The partition is sorted ascending on the value.
				lim := shiftValue(cur, w.lowerV, w.unit)
				lo, _ = slices.BinarySearchFunc(p, lim, func(i int, l bson.RawValue) int { return Compare(sortKeys[i*nk], l) })
			}
		}
		if w.upperSet {
			if w.upperCur {
				hi = j
			} else {
				lim := shiftValue(cur, w.upperV, w.unit)
				k, _ := slices.BinarySearchFunc(p, lim, func(i int, l bson.RawValue) int {
					if Compare(sortKeys[i*nk], l) <= 0 {
						return -1
					}
					return 1
				})
				hi = k - 1
			}
		}
		return lo, hi
	}
	if !o.win.lowerSet && !o.win.upperSet {
		// The whole partition: one fold.
		a, err := newAcc(0)
		if err != nil {
			return nil, err
		}
		for k := range p {
			add(a, k)
		}
		r := a.result()
		for j := range vals {
			vals[j] = r
		}
		if o.acc.spec != nil {
			// n may differ per document: fold per document.
			for j := range vals {
				a, err := newAcc(j)
				if err != nil {
					return nil, err
				}
				for k := range p {
					add(a, k)
				}
				vals[j] = a.result()
			}
		}
		return vals, nil
	}
	// A window open below grows only: fold incrementally.
	var grow accumulator
	next := 0
	for j := range p {
		lo, hi := bounds(j)
		if !o.win.lowerSet && o.acc.spec == nil {
			if grow == nil {
				grow = newAccumulator(o.acc.op)
			}
			for ; next <= hi; next++ {
				add(grow, next)
			}
			vals[j] = grow.result()
			continue
		}
		a, err := newAcc(j)
		if err != nil {
			return nil, err
		}
		for k := lo; k <= hi; k++ {
			add(a, k)
		}
		vals[j] = a.result()
	}
	return vals, nil
}

// checkRangeValue refuses a sortBy value a range window cannot use.
func checkRangeValue(v bson.RawValue, unit string) error {
	if unit != "" {
		if v.Type != bson.TypeDateTime {
			return mongoerr.New(5429513, "Invalid range: Expected the sortBy field to be a Date, but it was %s", typeName(v.Type))
		}
		return nil
	}
	if !isNumeric(v.Type) {
		return mongoerr.New(5429414, "Invalid range: Expected the sortBy field to be a number, but it was %s", typeName(v.Type))
	}
	return nil
}

// shiftValue is cur moved by the bound: a sum, or a date moved by unit.
func shiftValue(cur, by bson.RawValue, unit string) bson.RawValue {
	if unit == "" {
		return arith(opAdd, cur, by)
	}
	t := time.UnixMilli(cur.DateTime()).UTC()
	return vTime(addTime(t, unit, asInt64(by)))
}
