package mql

import (
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Stages that group documents: $group, $count, $sortByCount, $bucket,
// $bucketAuto (without granularity).

type groupAcc struct {
	name string
	op   string
	e    *Expr
	spec *nSpec // the accumulators with a specification document ($topN, ...)
	// gathers: the accumulator keeps every value ($push), counted in the
	// group's memory.
	gathers bool
}

type groupStage struct {
	id   *Expr
	accs []groupAcc
}

func compileGroup(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15947, "a group's fields must be specified in an object")
	}
	g := &groupStage{}
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		name := string(k)
		if name == "_id" {
			e, err := CompileExpr(f)
			if err != nil {
				return nil, err
			}
			g.id = e
			continue
		}
		a, err := compileAccField(name, f)
		if err != nil {
			return nil, err
		}
		g.accs = append(g.accs, a)
	}
	if g.id == nil {
		return nil, mongoerr.New(15955, "a group specification must include an _id")
	}
	return g, nil
}

// compileAccField compiles one output field of $group (or of $bucket's
// output): {name: {$accumulator: argument}}.
func compileAccField(name string, f bson.RawValue) (groupAcc, error) {
	// In mongod's order (AccumulationStatement::parseAccumulationStatement).
	switch {
	case f.Type != bson.TypeEmbeddedDocument || !isOperatorDoc(f):
		return groupAcc{}, mongoerr.New(40234, "The field '%s' must be an accumulator object", name)
	case strings.Contains(name, "."):
		return groupAcc{}, mongoerr.New(40235, "The field name '%s' cannot contain '.'", name)
	case strings.HasPrefix(name, "$"):
		return groupAcc{}, mongoerr.New(40236, "The field name '%s' cannot be an operator name", name)
	case arrayLen(f.Value) != 1:
		return groupAcc{}, mongoerr.New(40238, "The field '%s' must specify one accumulator", name)
	}
	ait := iterDoc(f.Value)
	op, arg, _ := ait.next()
	// mongod refuses an array argument for every accumulator, $push and
	// $addToSet included (AccumulationStatement::parseAccumulationStatement).
	if arg.Type == bson.TypeArray {
		return groupAcc{}, mongoerr.New(40237, "The %s accumulator is a unary operator", op)
	}
	acc, ok := lookupOperator(accumulators, string(op))
	if !ok {
		return groupAcc{}, mongoerr.New(15952, "unknown group operator '%s'", op)
	}
	if acc.new == nil {
		spec, err := compileNAccumulator(string(op), arg, nil)
		if err != nil {
			return groupAcc{}, err
		}
		return groupAcc{name: name, op: string(op), e: spec.input, spec: spec}, nil
	}
	if string(op) == "$count" {
		if arg.Type != bson.TypeEmbeddedDocument || arrayLen(arg.Value) != 0 {
			return groupAcc{}, mongoerr.New(mongoerr.TypeMismatch, "$count takes no arguments, i.e. $count:{}")
		}
		arg = vInt32(1)
	}
	e, err := CompileExpr(arg)
	if err != nil {
		return groupAcc{}, err
	}
	return groupAcc{name: name, op: string(op), e: e, gathers: string(op) == "$push"}, nil
}

// newAccs returns fresh accumulators for the group with key id.
func newAccs(accs []groupAcc, id bson.RawValue, now time.Time, coll *Collation) ([]accumulator, error) {
	out := make([]accumulator, len(accs))
	var idDoc bson.Raw
	for i, a := range accs {
		if a.spec == nil {
			out[i] = newAccumulatorColl(a.op, coll)
			continue
		}
		// n may depend on the group key only: it sees {_id: <key>}.
		if idDoc == nil {
			d := newDoc(len(id.Value) + 16)
			d.add("_id", id)
			idDoc = d.done()
		}
		acc, err := a.spec.newAcc(&evalCtx{root: idDoc, current: idDoc, now: now})
		if err != nil {
			return nil, err
		}
		out[i] = acc
	}
	return out, nil
}

func (g *groupStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	return groupDocs(c, "$group", in, g.id.evalIn, g.accs)
}

func (g *groupStage) newProc(c *runCtx, at stageAt, next proc) proc {
	return &groupProc{c: c, name: at.name, g: g, built: at.built, replay: at.replay, gr: newGrouper(c, g.id.evalIn, g.accs),
		buf: stageBuffer{c: c, name: at.name}, spill: spill{c: c}, next: next}
}

// groupDocs groups in by the key that id computes and folds each group
// with accs; groups come out in the order their first document came in.
func groupDocs(c *runCtx, name string, in []bson.Raw, id func(*evalCtx) (bson.RawValue, error), accs []groupAcc) ([]bson.Raw, error) {
	gr := newGrouper(c, id, accs)
	defer gr.release()
	for _, d := range in {
		if err := gr.add(d); err == errGroupsFull {
			return nil, errStageMemory(name, c.lim.stageBytes(), c.lim.NoDiskUse)
		} else if err != nil {
			return nil, err
		}
	}
	return gr.results(), nil
}

// errGroupsFull is returned by grouper.add when the groups pass the
// stage limit.
var errGroupsFull = errors.New("mql: groups past the stage memory limit")

// grouper folds documents into groups. Its estimate of the memory the
// groups hold (keys, accumulators, and what $push gathers) is reserved
// from the budget and held to the stage limit, less what its owner
// reserves (extra).
type grouper struct {
	c      *runCtx
	extra  int64
	id     func(*evalCtx) (bson.RawValue, error)
	accs   []groupAcc
	order  []*group
	groups map[string]*group
	key    []byte
	ec     *evalCtx
	bytes  int64
}

type group struct {
	id   bson.RawValue
	accs []accumulator
}

func newGrouper(c *runCtx, id func(*evalCtx) (bson.RawValue, error), accs []groupAcc) *grouper {
	return &grouper{c: c, id: id, accs: accs, groups: map[string]*group{}, ec: &evalCtx{now: c.now, coll: c.coll}}
}

// groupKey returns d's group id and its key bytes, appended to dst.
func groupKey(ec *evalCtx, id func(*evalCtx) (bson.RawValue, error), d bson.Raw, dst []byte) (bson.RawValue, []byte, error) {
	ec.root, ec.current = d, d
	v, err := id(ec)
	if err != nil {
		return v, dst, err
	}
	if v.Type == 0 {
		v = nullValue
	}
	if ec.coll != nil {
		return v, appendKey(dst, ec.coll.Transform(v)), nil
	}
	return v, appendKey(dst, v), nil
}

func (g *grouper) add(d bson.Raw) error {
	id, key, err := groupKey(g.ec, g.id, d, g.key[:0])
	if err != nil {
		return err
	}
	g.key = key
	gr, ok := g.groups[string(key)]
	if !ok {
		as, err := newAccs(g.accs, id, g.c.now, g.c.coll)
		if err != nil {
			return err
		}
		gr = &group{id: id, accs: as}
		g.groups[string(key)] = gr
		g.order = append(g.order, gr)
		if err := g.grow(int64(2*len(key)) + int64(64*(1+len(as)))); err != nil {
			return err
		}
	}
	for i := range g.accs {
		a := &g.accs[i]
		v, err := a.e.evalIn(g.ec)
		if err != nil {
			return err
		}
		if a.gathers {
			if err := g.grow(int64(len(v.Value)) + docOverhead); err != nil {
				return err
			}
		}
		if da, ok := gr.accs[i].(docAccumulator); ok {
			da.addDoc(v, d)
			continue
		}
		gr.accs[i].add(v)
	}
	return nil
}

func (g *grouper) grow(n int64) error {
	if g.bytes+g.extra+n > g.c.lim.stageBytes() {
		return errGroupsFull
	}
	if err := g.c.mem.grow(n); err != nil {
		return err
	}
	g.bytes += n
	return nil
}

// release gives back what the groups reserved from the budget.
func (g *grouper) release() {
	g.c.mem.shrink(g.bytes)
	g.bytes = 0
}

// results returns a document per group, in the order of their first
// documents.
func (g *grouper) results() []bson.Raw {
	out := make([]bson.Raw, 0, len(g.order))
	for _, gr := range g.order {
		d := newDoc(64)
		d.add("_id", gr.id)
		for i, a := range g.accs {
			d.add(a.name, gr.accs[i].result())
		}
		out = append(out, d.done())
	}
	return out
}

// compileCountStage compiles $count.
func compileCountStage(name string, v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeString {
		return nil, mongoerr.New(40156, "the count field must be a non-empty string")
	}
	s := str(v)
	switch {
	case s == "":
		return nil, mongoerr.New(40157, "the count field must be a non-empty string")
	case strings.HasPrefix(s, "$"):
		return nil, mongoerr.New(40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(s, "."):
		return nil, mongoerr.New(40160, "the count field cannot contain '.'")
	}
	return countStage(s), nil
}

type countStage string

func (s countStage) newProc(_ *runCtx, _ stageAt, next proc) proc {
	return &countProc{field: string(s), next: next}
}

type countProc struct {
	field string
	n     int64
	next  proc
}

func (p *countProc) push(bson.Raw) error {
	p.n++
	return nil
}

func (p *countProc) end() error {
	if p.n == 0 {
		return p.next.end()
	}
	d := newDoc(32)
	d.add(p.field, vInt32(int32(p.n)))
	return feed(p.next, []bson.Raw{d.done()})
}

// compileSortByCountStage compiles $sortByCount.
func compileSortByCountStage(name string, v bson.RawValue) (stage, error) {
	isPath := v.Type == bson.TypeString && strings.HasPrefix(str(v), "$")
	if !isPath && !isOperatorDoc(v) {
		return nil, mongoerr.New(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
	}
	e, err := CompileExpr(v)
	if err != nil {
		return nil, err
	}
	return sortByCountStage{e}, nil
}

type sortByCountStage struct{ e *Expr }

func (s sortByCountStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	g := &groupStage{id: s.e, accs: []groupAcc{{name: "count", op: "$sum", e: &Expr{e: literalExpr{vInt32(1)}}}}}
	out, err := g.run(c, in)
	if err != nil {
		return nil, err
	}
	sortSpec := newDoc(16)
	sortSpec.add("count", vInt32(-1))
	srt, _ := CompileSort(sortSpec.done())
	srt.SortDocs(out)
	return out, nil
}

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
	out, err := groupDocs(c, "$bucket", in, s.bucketOf, s.accs)
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
	ec := &evalCtx{now: c.now, coll: c.coll}
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
		accs, err := newAccs(s.accs, nullValue, c.now, c.coll)
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
