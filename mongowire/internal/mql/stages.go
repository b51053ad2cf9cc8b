package mql

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $group

type groupAcc struct {
	name string
	op   string
	e    *Expr
	spec *nSpec // the accumulators with a specification document ($topN, ...)
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
	if !accumulatorNames[string(op)] {
		return groupAcc{}, mongoerr.New(15952, "unknown group operator '%s'", op)
	}
	if nAccumulators[string(op)] {
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
	return groupAcc{name: name, op: string(op), e: e}, nil
}

// newAccs returns fresh accumulators for the group with key id.
func newAccs(accs []groupAcc, id bson.RawValue, now time.Time) ([]accumulator, error) {
	out := make([]accumulator, len(accs))
	var idDoc bson.Raw
	for i, a := range accs {
		if a.spec == nil {
			out[i] = newAccumulator(a.op)
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
	return groupDocs(c, in, g.id.evalIn, g.accs)
}

// groupDocs groups in by the key that id computes and folds each group
// with accs; groups come out in the order their first document came in.
func groupDocs(c *runCtx, in []bson.Raw, id func(*evalCtx) (bson.RawValue, error), accs []groupAcc) ([]bson.Raw, error) {
	type group struct {
		id   bson.RawValue
		accs []accumulator
	}
	var order []*group
	groups := map[string]*group{}
	var key []byte
	ec := &evalCtx{now: c.now}
	for _, d := range in {
		ec.root, ec.current = d, d
		id, err := id(ec)
		if err != nil {
			return nil, err
		}
		if id.Type == 0 {
			id = nullValue
		}
		key = appendKey(key[:0], id)
		gr, ok := groups[string(key)]
		if !ok {
			as, err := newAccs(accs, id, c.now)
			if err != nil {
				return nil, err
			}
			gr = &group{id: id, accs: as}
			groups[string(key)] = gr
			order = append(order, gr)
		}
		for i, a := range accs {
			v, err := a.e.evalIn(ec)
			if err != nil {
				return nil, err
			}
			if da, ok := gr.accs[i].(docAccumulator); ok {
				da.addDoc(v, d)
				continue
			}
			gr.accs[i].add(v)
		}
	}
	out := make([]bson.Raw, 0, len(order))
	for _, gr := range order {
		d := newDoc(64)
		d.add("_id", gr.id)
		for i, a := range accs {
			d.add(a.name, gr.accs[i].result())
		}
		out = append(out, d.done())
	}
	return out, nil
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

// $unwind

type unwindStage struct {
	path     []string
	index    string
	preserve bool
}

func compileUnwind(v bson.RawValue) (stage, error) {
	s := &unwindStage{}
	var path string
	switch v.Type {
	case bson.TypeString:
		path = str(v)
	case bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		for {
			k, f, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "path":
				if f.Type != bson.TypeString {
					return nil, mongoerr.New(28808, "expected a string as the path for $unwind stage, got %s", typeName(f.Type))
				}
				path = str(f)
			case "includeArrayIndex":
				if f.Type != bson.TypeString || str(f) == "" {
					return nil, mongoerr.New(28810, "expected a non-empty string for the includeArrayIndex option to $unwind stage")
				}
				s.index = str(f)
				if strings.HasPrefix(s.index, "$") {
					return nil, mongoerr.New(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", s.index)
				}
				if err := checkPathParts(strings.Split(s.index, ".")); err != nil {
					return nil, err
				}
			case "preserveNullAndEmptyArrays":
				if f.Type != bson.TypeBoolean {
					return nil, mongoerr.New(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", typeName(f.Type))
				}
				s.preserve = f.Boolean()
			default:
				return nil, mongoerr.New(28811, "unrecognized option to $unwind stage: %s", k)
			}
		}
		if path == "" {
			return nil, mongoerr.New(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, mongoerr.New(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeName(v.Type))
	}
	if !strings.HasPrefix(path, "$") {
		return nil, mongoerr.New(28818, "path option to $unwind stage should be prefixed with a '$': %s", path)
	}
	s.path = strings.Split(path[1:], ".")
	if err := checkPathParts(s.path); err != nil {
		return nil, err
	}
	return s, nil
}

// docPath follows path through embedded documents only.
func docPath(doc bson.Raw, path []string) bson.RawValue {
	v := vDoc(doc)
	for _, c := range path {
		if v.Type != bson.TypeEmbeddedDocument {
			return missing
		}
		v = lookup(v.Value, c)
	}
	return v
}

func (s *unwindStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	var out []bson.Raw
	emit := func(d bson.Raw, v bson.RawValue, idx bson.RawValue, replace bool) {
		if !replace && s.index == "" {
			out = append(out, d)
			return
		}
		root := rawNode(vDoc(d))
		root.load()
		if replace {
			setField(root, s.path, v)
		}
		if s.index != "" {
			setField(root, strings.Split(s.index, "."), idx)
		}
		out = append(out, root.encodeDoc(nil))
	}
	for _, d := range in {
		v := docPath(d, s.path)
		switch v.Type {
		case bson.TypeArray:
			elems := arrayValues(v.Value)
			if len(elems) == 0 {
				if s.preserve {
					emit(d, missing, nullValue, true)
				}
				continue
			}
			for i, e := range elems {
				emit(d, e, vInt64(int64(i)), true)
			}
		case 0, bson.TypeNull, bson.TypeUndefined:
			if s.preserve {
				emit(d, v, nullValue, false)
			}
		default:
			emit(d, v, nullValue, false)
		}
	}
	return out, nil
}

type replaceRootStage struct{ e *Expr }

func (s replaceRootStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := make([]bson.Raw, len(in))
	for i, d := range in {
		v, err := c.eval(s.e, d)
		if err != nil {
			return nil, err
		}
		if v.Type != bson.TypeEmbeddedDocument {
			shown := "MISSING"
			if v.Type != 0 {
				shown = shortString(v)
			}
			return nil, mongoerr.New(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", shown, typeName(v.Type), docString(d))
		}
		out[i] = v.Value
	}
	return out, nil
}

// $lookup (equality form)

type lookupStage struct {
	from, as     string
	localField   []string
	foreignField string

	// The pipeline form: sub runs over the foreign documents; with let, the
	// pipeline is bound to each input document's values and compiled per
	// document (letNames/letExprs), otherwise compiled once.
	pipeline bson.RawValue
	sub      *Pipeline
	letNames []string
	letExprs []*Expr
}

func compileLookup(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $lookup specification must be an Object")
	}
	s := &lookupStage{}
	var local string
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "from", "as", "localField", "foreignField":
			if f.Type != bson.TypeString {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument '%s: %s' must be a string, is type %s", k, shortString(f), typeName(f.Type))
			}
			switch string(k) {
			case "from":
				s.from = str(f)
			case "as":
				s.as = str(f)
			case "localField":
				local = str(f)
			default:
				s.foreignField = str(f)
			}
		case "pipeline":
			if f.Type != bson.TypeArray {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'pipeline' must be an array, is type %s", typeName(f.Type))
			}
			s.pipeline = f
		case "let":
			if f.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'let' must be an object, is type %s", typeName(f.Type))
			}
			lit := iterDoc(f.Value)
			for {
				name, ev, ok := lit.next()
				if !ok {
					break
				}
				if !isVarName(string(name)) || name[0] < 'a' || name[0] > 'z' {
					return nil, mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", name)
				}
				e, err := CompileExpr(ev)
				if err != nil {
					return nil, err
				}
				s.letNames = append(s.letNames, string(name))
				s.letExprs = append(s.letExprs, e)
			}
		default:
			return nil, mongoerr.New(mongoerr.FailedToParse, "unknown argument to $lookup: %s", k)
		}
	}
	switch {
	case s.from == "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'from' field for a $lookup")
	case s.as == "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'as' field for a $lookup")
	case s.pipeline.Type == 0 && (local == "" || s.foreignField == ""):
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")
	case (local == "") != (s.foreignField == ""):
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires both or neither of 'localField' and 'foreignField' to be specified")
	case s.pipeline.Type == 0 && len(s.letNames) > 0:
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup with 'let' requires 'pipeline' to be specified")
	}
	if local != "" {
		s.localField = strings.Split(local, ".")
	}
	if s.pipeline.Type != 0 {
		// Compile now: once for good without let, and with the variables
		// bound to null to report errors early with let.
		sub, err := s.compileSub(nil)
		if err != nil {
			return nil, err
		}
		if len(s.letNames) == 0 {
			s.sub = sub
		}
	}
	return s, nil
}

// compileSub compiles the sub-pipeline with the let variables bound to
// vals (null when vals is nil).
func (s *lookupStage) compileSub(vals []bson.RawValue) (*Pipeline, error) {
	p := s.pipeline
	if len(s.letNames) > 0 {
		let := newDoc(64)
		for i, n := range s.letNames {
			v := nullValue
			if vals != nil {
				v = vals[i]
			}
			if v.Type == 0 {
				let.add(n, vString("$$REMOVE"))
				continue
			}
			lit := newDoc(len(v.Value) + 16)
			lit.add("$literal", v)
			let.add(n, vDoc(lit.done()))
		}
		var err error
		if p, err = BindLet(p, let.done()); err != nil {
			return nil, err
		}
	}
	var stages []bson.Raw
	for _, st := range arrayValues(p.Value) {
		if st.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		stages = append(stages, st.Value)
	}
	return CompilePipeline(stages)
}

func (s *lookupStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	var foreign []bson.Raw
	if c.env != nil {
		var err error
		foreign, err = c.env.Collection(s.from)
		if err != nil {
			return nil, err
		}
	}
	asPath := strings.Split(s.as, ".")
	out := make([]bson.Raw, len(in))
	for i, d := range in {
		candidates := foreign
		if s.localField != nil {
			candidates = s.equalityMatches(d, foreign)
		}
		var matched []bson.RawValue
		if s.pipeline.Type == 0 {
			for _, f := range candidates {
				matched = append(matched, vDoc(f))
			}
		} else {
			sub := s.sub
			if sub == nil {
				vals := make([]bson.RawValue, len(s.letExprs))
				for j, e := range s.letExprs {
					v, err := c.eval(e, d)
					if err != nil {
						return nil, err
					}
					vals[j] = v
				}
				var err error
				if sub, err = s.compileSub(vals); err != nil {
					return nil, err
				}
			}
			res, err := sub.run(c.env, append([]bson.Raw(nil), candidates...), c.now)
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				matched = append(matched, vDoc(r))
			}
		}
		root := rawNode(vDoc(d))
		root.load()
		setField(root, asPath, vArray(matched))
		out[i] = root.encodeDoc(nil)
	}
	return out, nil
}

// equalityMatches returns the foreign documents whose foreignField
// matches d's localField, with query semantics (arrays match by element,
// a missing local value matches null and missing).
func (s *lookupStage) equalityMatches(d bson.Raw, foreign []bson.Raw) []bson.Raw {
	local := evalPath(vDoc(d), s.localField)
	var op valueOp
	switch {
	case local.Type == bson.TypeArray:
		in := &inOp{}
		for _, e := range arrayValues(local.Value) {
			if e.Type == bson.TypeNull {
				in.hasNull = true
				continue
			}
			in.vals = append(in.vals, e)
		}
		op = in
	case local.Type == 0:
		op = newEqOp(nullValue)
	default:
		op = newEqOp(local)
	}
	n := newFieldNode(s.foreignField, op)
	var out []bson.Raw
	for _, f := range foreign {
		if n.match(f, nil) {
			out = append(out, f)
		}
	}
	return out
}

// $facet

type facetStage struct {
	names []string
	subs  []*Pipeline
}

func compileFacet(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15947, "the $facet specification must be a non-empty object")
	}
	s := &facetStage{}
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		if f.Type != bson.TypeArray {
			return nil, mongoerr.New(40170, "arguments to $facet must be arrays, %s is type %s", k, typeName(f.Type))
		}
		var stages []bson.Raw
		for _, st := range arrayValues(f.Value) {
			if st.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40171, "elements of arrays in $facet spec must be non-empty objects, %s argument contained an element of type %s", k, typeName(st.Type))
			}
			name := ""
			if it := iterDoc(st.Value); true {
				kk, _, _ := it.next()
				name = string(kk)
			}
			if name == "$facet" {
				return nil, mongoerr.New(40600, "$facet is not allowed to be used within a $facet stage")
			}
			stages = append(stages, st.Value)
		}
		p, err := CompilePipeline(stages)
		if err != nil {
			return nil, err
		}
		s.names = append(s.names, string(k))
		s.subs = append(s.subs, p)
	}
	if len(s.names) == 0 {
		return nil, mongoerr.New(40169, "the $facet specification must be a non-empty object")
	}
	return s, nil
}

func (s *facetStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	d := newDoc(256)
	for i, p := range s.subs {
		res, err := p.run(c.env, append([]bson.Raw(nil), in...), c.now)
		if err != nil {
			return nil, err
		}
		vals := make([]bson.RawValue, len(res))
		for j, r := range res {
			vals[j] = vDoc(r)
		}
		d.add(s.names[i], vArray(vals))
	}
	return []bson.Raw{d.done()}, nil
}

// $unionWith

type unionWithStage struct {
	coll string
	sub  *Pipeline
}

func compileUnionWith(v bson.RawValue) (stage, error) {
	s := &unionWithStage{}
	switch v.Type {
	case bson.TypeString:
		s.coll = str(v)
	case bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		for {
			k, f, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "coll":
				if f.Type != bson.TypeString {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$unionWith.coll' is the wrong type '%s', expected type 'string'", typeName(f.Type))
				}
				s.coll = str(f)
			case "pipeline":
				if f.Type != bson.TypeArray {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$unionWith.pipeline' is the wrong type '%s', expected type 'array'", typeName(f.Type))
				}
				var stages []bson.Raw
				for _, st := range arrayValues(f.Value) {
					if st.Type != bson.TypeEmbeddedDocument {
						return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
					}
					stages = append(stages, st.Value)
				}
				p, err := CompilePipeline(stages)
				if err != nil {
					return nil, err
				}
				s.sub = p
			default:
				return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$unionWith.%s' is an unknown field.", k)
			}
		}
		if s.coll == "" {
			return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$unionWith.coll' is missing but a required field")
		}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $unionWith stage specification must be an object or string, but found %s", typeName(v.Type))
	}
	return s, nil
}

func (s *unionWithStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	var docs []bson.Raw
	if c.env != nil {
		var err error
		if docs, err = c.env.Collection(s.coll); err != nil {
			return nil, err
		}
	}
	if s.sub != nil {
		var err error
		if docs, err = s.sub.run(c.env, append([]bson.Raw(nil), docs...), c.now); err != nil {
			return nil, err
		}
	}
	out := make([]bson.Raw, 0, len(in)+len(docs))
	return append(append(out, in...), docs...), nil
}
