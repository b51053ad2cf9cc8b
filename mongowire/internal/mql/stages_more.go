package mql

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $bucket, $bucketAuto and $sample, with the codes and messages of mongod's
// document_source_bucket.cpp and document_source_sample.cpp.

type bucketStage struct {
	groupBy    *Expr
	boundaries []bson.RawValue
	def        bson.RawValue // Type 0: no default bucket
	accs       []groupAcc
}

func compileBucket(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40201, "Argument to $bucket stage must be an object, but found type: %s.", typeName(v.Type))
	}
	s := &bucketStage{}
	var output bson.RawValue
	hasBoundaries := false
	it := iterDoc(v.Value)
	for {
		k, arg, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "groupBy":
			isPath := arg.Type == bson.TypeString && strings.HasPrefix(str(arg), "$")
			if !isPath && !isOperatorDoc(arg) {
				return nil, mongoerr.New(40202, "The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression, but found: %s.", shortString(arg))
			}
			e, err := CompileExpr(arg)
			if err != nil {
				return nil, err
			}
			s.groupBy = e
		case "boundaries":
			if arg.Type != bson.TypeArray {
				return nil, mongoerr.New(40200, "The $bucket 'boundaries' field must be an array, but found type: %s.", typeName(arg.Type))
			}
			hasBoundaries = true
			s.boundaries = arrayValues(arg.Value)
			for _, b := range s.boundaries {
				if !isConstant(b) {
					return nil, mongoerr.New(40191, "The $bucket 'boundaries' field must be an array of constant values, but found value: %s.", shortString(b))
				}
			}
		case "default":
			if !isConstant(arg) {
				return nil, mongoerr.New(40195, "The $bucket 'default' field must be a constant expression, but found: %s.", shortString(arg))
			}
			s.def = arg
		case "output":
			if arg.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40196, "The $bucket 'output' field must be an object, but found type: %s.", typeName(arg.Type))
			}
			output = arg
		default:
			return nil, mongoerr.New(40197, "Unrecognized option to $bucket: %s.", k)
		}
	}
	if s.groupBy == nil || !hasBoundaries {
		return nil, mongoerr.New(40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.")
	}
	b := s.boundaries
	if len(b) < 2 {
		return nil, mongoerr.New(40192, "The $bucket 'boundaries' field must have at least 2 values, but found %d value(s).", len(b))
	}
	for i := 1; i < len(b); i++ {
		if TypeBracket(b[i-1].Type) != TypeBracket(b[i].Type) {
			return nil, mongoerr.New(40193, "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types %s and %s.", typeName(b[i-1].Type), typeName(b[i].Type))
		}
		if Compare(b[i-1], b[i]) >= 0 {
			return nil, mongoerr.New(40194, "The 'boundaries' option to $bucket must be sorted, but elements %d and %d are not in ascending order (%s is not less than %s).", i-1, i, shortString(b[i-1]), shortString(b[i]))
		}
	}
	if s.def.Type != 0 && Compare(s.def, b[0]) >= 0 && Compare(s.def, b[len(b)-1]) < 0 {
		return nil, mongoerr.New(40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.")
	}
	if output.Type == 0 {
		s.accs = []groupAcc{{name: "count", op: "$sum", e: &Expr{e: literalExpr{vInt32(1)}}}}
		return s, nil
	}
	oit := iterDoc(output.Value)
	for {
		k, f, ok := oit.next()
		if !ok {
			break
		}
		a, err := compileAccField(string(k), f)
		if err != nil {
			return nil, err
		}
		s.accs = append(s.accs, a)
	}
	return s, nil
}

// isConstant reports whether v is a literal rather than an expression:
// not a field path, not a variable, not an operator document.
func isConstant(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeString:
		return !strings.HasPrefix(str(v), "$")
	case bson.TypeEmbeddedDocument:
		return !isOperatorDoc(v)
	}
	return true
}

// bucketOf is the _id of the bucket holding the groupBy value x: the
// lower boundary of the range it falls in, else the default.
func (s *bucketStage) bucketOf(c *evalCtx) (bson.RawValue, error) {
	x, err := s.groupBy.evalIn(c)
	if err != nil {
		return missing, err
	}
	if x.Type == 0 {
		x = nullValue
	}
	b := s.boundaries
	if Compare(x, b[0]) >= 0 && Compare(x, b[len(b)-1]) < 0 {
		for i := len(b) - 2; i >= 0; i-- {
			if Compare(x, b[i]) >= 0 {
				return b[i], nil
			}
		}
	}
	if s.def.Type == 0 {
		return missing, mongoerr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
	}
	return s.def, nil
}

func (s *bucketStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out, err := groupDocs(c, in, s.bucketOf, s.accs)
	if err != nil {
		return nil, err
	}
	sortByID.SortDocs(out)
	return out, nil
}

// sortByID sorts documents by _id ascending.
var sortByID = func() *Sort {
	d := newDoc(16)
	d.add("_id", vInt32(1))
	s, err := CompileSort(d.done())
	if err != nil {
		panic(err)
	}
	return s
}()

// sampleStage returns up to size documents of its input chosen at
// random, in random order.
type sampleStage int64

func compileSample(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(28745, "the $sample stage specification must be an object")
	}
	size, hasSize := int64(0), false
	it := iterDoc(v.Value)
	for {
		k, arg, ok := it.next()
		if !ok {
			break
		}
		if string(k) != "size" {
			return nil, mongoerr.New(28748, "unrecognized option to $sample: %s", k)
		}
		if !isNumeric(arg.Type) {
			return nil, mongoerr.New(28746, "size argument to $sample must be a number")
		}
		n, _ := coerceInt64(arg)
		if n < 0 || asFloat(arg) < 0 {
			return nil, mongoerr.New(28747, "size argument to $sample must not be negative")
		}
		size, hasSize = n, true
	}
	if !hasSize {
		return nil, mongoerr.New(28749, "$sample stage must specify a size")
	}
	return sampleStage(size), nil
}

func (s sampleStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := append([]bson.Raw(nil), in...)
	k := min(int64(len(out)), int64(s))
	// A partial Fisher-Yates shuffle: the first k places get a uniform
	// random choice without replacement.
	for i := range k {
		j := i + rand.Int64N(int64(len(out))-i)
		out[i], out[j] = out[j], out[i]
	}
	return out[:k], nil
}

// bucketAutoStage is $bucketAuto without granularity: the documents
// sorted by groupBy are cut into buckets of about len/buckets documents,
// never splitting equal values, as DocumentSourceBucketAuto does.
type bucketAutoStage struct {
	groupBy *Expr
	buckets int
	accs    []groupAcc
}

func compileBucketAuto(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40240, "The argument to $bucketAuto must be an object, but found type: %s", typeName(v.Type))
	}
	s := &bucketAutoStage{}
	hasBuckets := false
	it := iterDoc(v.Value)
	for {
		k, arg, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "groupBy":
			isPath := arg.Type == bson.TypeString && strings.HasPrefix(str(arg), "$")
			if !isPath && !isOperatorDoc(arg) {
				return nil, mongoerr.New(40239, "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object, but found: %s", shortString(arg))
			}
			e, err := CompileExpr(arg)
			if err != nil {
				return nil, err
			}
			s.groupBy = e
		case "buckets":
			if !isNumeric(arg.Type) {
				return nil, mongoerr.New(40241, "The $bucketAuto 'buckets' field must be a numeric value, but found type: %s", typeName(arg.Type))
			}
			n, ok := int32Value(arg)
			if !ok {
				return nil, mongoerr.New(40242, "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found %s", cppDouble(asFloat(arg)))
			}
			s.buckets, hasBuckets = int(n), true
		case "output":
			if arg.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40244, "The $bucketAuto 'output' field must be an object, but found type: %s", typeName(arg.Type))
			}
			oit := iterDoc(arg.Value)
			for {
				name, f, ok := oit.next()
				if !ok {
					break
				}
				a, err := compileAccField(string(name), f)
				if err != nil {
					return nil, err
				}
				s.accs = append(s.accs, a)
			}
		case "granularity":
			if arg.Type != bson.TypeString {
				return nil, mongoerr.New(40261, "The $bucketAuto 'granularity' field must be a string, but found type: %s", typeName(arg.Type))
			}
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "$bucketAuto with a granularity is not supported by this server")
		default:
			return nil, mongoerr.New(40245, "Unrecognized option to $bucketAuto: %s", k)
		}
	}
	if s.groupBy == nil || !hasBuckets {
		return nil, mongoerr.New(40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified")
	}
	if s.buckets <= 0 {
		return nil, mongoerr.New(40243, "The $bucketAuto 'buckets' field must be greater than 0, but found: %d", s.buckets)
	}
	if len(s.accs) == 0 {
		s.accs = []groupAcc{{name: "count", op: "$sum", e: &Expr{e: literalExpr{vInt32(1)}}}}
	}
	return s, nil
}

func (s *bucketAutoStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	type keyed struct {
		key bson.RawValue
		doc bson.Raw
	}
	ec := &evalCtx{now: c.now}
	items := make([]keyed, len(in))
	for i, d := range in {
		ec.root, ec.current = d, d
		k, err := s.groupBy.evalIn(ec)
		if err != nil {
			return nil, err
		}
		if k.Type == 0 {
			k = nullValue
		}
		items[i] = keyed{k, d}
	}
	slices.SortStableFunc(items, func(a, b keyed) int { return Compare(a.key, b.key) })
	size := int(math.Round(float64(len(items)) / float64(s.buckets)))
	size = max(size, 1)
	type bucket struct {
		min, max bson.RawValue
		accs     []accumulator
	}
	var buckets []*bucket
	add := func(b *bucket, it keyed) error {
		b.max = it.key
		ec.root, ec.current = it.doc, it.doc
		for i, a := range s.accs {
			v, err := a.e.evalIn(ec)
			if err != nil {
				return err
			}
			if da, ok := b.accs[i].(docAccumulator); ok {
				da.addDoc(v, it.doc)
				continue
			}
			b.accs[i].add(v)
		}
		return nil
	}
	next := 0
	for i := 0; i < s.buckets && next < len(items); i++ {
		accs, err := newAccs(s.accs, nullValue, c.now)
		if err != nil {
			return nil, err
		}
		b := &bucket{min: items[next].key, accs: accs}
		end := len(items)
		if i < s.buckets-1 {
			end = min(next+size, len(items))
			// Values equal to the last one taken join this bucket.
			for end < len(items) && Compare(items[end].key, items[end-1].key) == 0 {
				end++
			}
		}
		for ; next < end; next++ {
			if err := add(b, items[next]); err != nil {
				return nil, err
			}
		}
		if len(buckets) > 0 {
			// Minimums are inclusive, maximums exclusive but the last.
			buckets[len(buckets)-1].max = b.min
		}
		buckets = append(buckets, b)
	}
	out := make([]bson.Raw, 0, len(buckets))
	for _, b := range buckets {
		id := newDoc(len(b.min.Value) + len(b.max.Value) + 24)
		id.add("min", b.min)
		id.add("max", b.max)
		d := newDoc(64)
		d.add("_id", vDoc(id.done()))
		for i, a := range s.accs {
			d.add(a.name, b.accs[i].result())
		}
		out = append(out, d.done())
	}
	return out, nil
}
