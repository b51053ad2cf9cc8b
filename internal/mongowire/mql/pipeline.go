package mql

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

// Env gives a pipeline the documents of the other collections of its
// database (for $lookup). A missing collection is empty, not an error.
type Env interface {
	Collection(name string) ([]bson.Raw, error)
}

// Pipeline is a compiled aggregation pipeline. It is safe for concurrent
// use.
type Pipeline struct {
	stages []stage
}

// stage is one compiled pipeline stage.
type stage interface {
	run(c *runCtx, in []bson.Raw) ([]bson.Raw, error)
}

type runCtx struct {
	env Env
	now time.Time
}

func (c *runCtx) eval(e *Expr, doc bson.Raw) (bson.RawValue, error) {
	return e.evalIn(&evalCtx{root: doc, current: doc, now: c.now})
}

// stageNames lists the stages this package runs; knownStages are the
// other stage names MongoDB has, refused here as unsupported.
var (
	allStages = map[string]bool{
		"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
		"$sort": true, "$limit": true, "$skip": true, "$count": true, "$group": true,
		"$unwind": true, "$replaceRoot": true, "$replaceWith": true, "$lookup": true,
		"$facet": true, "$sortByCount": true, "$unionWith": true,
	}
	updateStages = map[string]bool{
		"$addFields": true, "$set": true, "$project": true, "$unset": true,
		"$replaceRoot": true, "$replaceWith": true,
	}
	knownStages = map[string]bool{
		"$out": true, "$merge": true, "$sample": true, "$bucket": true, "$bucketAuto": true,
		"$graphLookup": true, "$densify": true, "$fill": true, "$redact": true,
		"$geoNear": true, "$indexStats": true, "$collStats": true, "$changeStream": true,
		"$currentOp": true, "$listSessions": true, "$planCacheStats": true, "$search": true,
		"$setWindowFields": true, "$documents": true, "$listLocalSessions": true,
		"$changeStreamSplitLargeEvent": true, "$searchMeta": true, "$vectorSearch": true,
	}
)

// CompilePipeline compiles an aggregation pipeline. Stages and
// expressions this package does not implement are refused with an error
// naming them: 40324 "Unrecognized pipeline stage name: '$foo'", 168
// "Unrecognized expression '$foo'".
func CompilePipeline(stages []bson.Raw) (*Pipeline, error) {
	return compilePipeline(stages, allStages)
}

func compilePipeline(stages []bson.Raw, allowed map[string]bool) (*Pipeline, error) {
	p := &Pipeline{}
	for _, s := range stages {
		if err := s.Validate(); err != nil {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid pipeline stage: %v", err)
		}
		it := iterDoc(s)
		k, v, ok := it.next()
		if _, _, more := it.next(); !ok || more {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name := string(k)
		if !allStages[name] {
			if knownStages[name] {
				return nil, mongoerr.New(mongoerr.CommandNotSupported, "%s is not supported by this server", name)
			}
			return nil, mongoerr.New(mongoerr.Location40324, "Unrecognized pipeline stage name: '%s'", name)
		}
		if !allowed[name] {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "%s is not allowed to be used within an update", name)
		}
		st, err := compileStage(name, v)
		if err != nil {
			return nil, err
		}
		p.stages = append(p.stages, st)
	}
	return p, nil
}

// Run runs the pipeline over input and returns the output documents.
// env may be nil when the pipeline has no $lookup.
func (p *Pipeline) Run(env Env, input []bson.Raw) ([]bson.Raw, error) {
	return p.run(env, input, time.Now())
}

func (p *Pipeline) run(env Env, input []bson.Raw, now time.Time) ([]bson.Raw, error) {
	c := &runCtx{env: env, now: now}
	docs := input
	for _, s := range p.stages {
		var err error
		docs, err = s.run(c, docs)
		if err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func compileStage(name string, v bson.RawValue) (stage, error) {
	switch name {
	case "$match":
		if v.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(15959, "the match filter must be an expression in an object")
		}
		f, err := CompileFilter(v.Value)
		if err != nil {
			return nil, err
		}
		return matchStage{f}, nil
	case "$project":
		if v.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(15969, "$project specification must be an object")
		}
		if arrayLen(v.Value) == 0 {
			return nil, mongoerr.New(51272, "Invalid $project :: caused by :: projection specification must have at least one field")
		}
		p, err := compileProjection(v.Value, false)
		if err != nil {
			return nil, wrapStage(name, err)
		}
		return projectStage{p}, nil
	case "$unset":
		var fields []bson.RawValue
		switch v.Type {
		case bson.TypeString:
			fields = []bson.RawValue{v}
		case bson.TypeArray:
			fields = arrayValues(v.Value)
		}
		if len(fields) == 0 {
			return nil, mongoerr.New(31002, "$unset specification must be a string or an array with at least one field")
		}
		d := newDoc(64)
		for _, f := range fields {
			if f.Type != bson.TypeString {
				return nil, mongoerr.New(31120, "$unset specification must be a string or an array containing only string values")
			}
			d.add(str(f), vInt32(0))
		}
		p, err := compileProjection(d.done(), false)
		if err != nil {
			return nil, err
		}
		return projectStage{p}, nil
	case "$addFields", "$set":
		if v.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(40272, "%s specification stage must be an object, got %s", name, typeName(v.Type))
		}
		if arrayLen(v.Value) == 0 {
			return nil, mongoerr.New(40177, "Invalid %s :: caused by :: specification must have at least one field", name)
		}
		st, err := compileAddFields(v.Value)
		if err != nil {
			return nil, wrapStage(name, err)
		}
		return st, nil
	case "$sort":
		if v.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(15973, "the $sort key specification must be an object")
		}
		if arrayLen(v.Value) == 0 {
			return nil, mongoerr.New(15976, "$sort stage must have at least one sort key")
		}
		s, err := CompileSort(v.Value)
		if err != nil {
			return nil, err
		}
		return sortStage{s}, nil
	case "$limit":
		n, ok := integral(v)
		if !ok {
			return nil, mongoerr.New(15957, "the limit must be specified as a number")
		}
		if n <= 0 {
			return nil, mongoerr.New(15958, "the limit must be positive")
		}
		return limitStage(n), nil
	case "$skip":
		n, ok := integral(v)
		if !ok {
			return nil, mongoerr.New(15972, "Argument to $skip must be a number")
		}
		if n < 0 {
			return nil, mongoerr.New(15956, "Argument to $skip cannot be negative")
		}
		return skipStage(n), nil
	case "$count":
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
	case "$group":
		return compileGroup(v)
	case "$sortByCount":
		isPath := v.Type == bson.TypeString && strings.HasPrefix(str(v), "$")
		if !isPath && !isOperatorDoc(v) {
			return nil, mongoerr.New(40148, "the sortByCount field must be defined as a $-prefixed path or an expression")
		}
		e, err := CompileExpr(v)
		if err != nil {
			return nil, err
		}
		return sortByCountStage{e}, nil
	case "$unwind":
		return compileUnwind(v)
	case "$replaceRoot", "$replaceWith":
		root := v
		if name == "$replaceRoot" {
			if v.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(40228, "$replaceRoot requires an object as its argument")
			}
			root = lookup(v.Value, "newRoot")
			if root.Type == 0 {
				return nil, mongoerr.New(40231, "no newRoot specified for the $replaceRoot stage")
			}
		}
		e, err := CompileExpr(root)
		if err != nil {
			return nil, err
		}
		return replaceRootStage{e}, nil
	case "$lookup":
		return compileLookup(v)
	case "$facet":
		return compileFacet(v)
	case "$unionWith":
		return compileUnionWith(v)
	}
	return nil, mongoerr.New(mongoerr.Location40324, "Unrecognized pipeline stage name: '%s'", name)
}

// wrapStage words a parse error as MongoDB does for $project and
// $addFields: "Invalid $project :: caused by :: <message>".
func wrapStage(name string, err error) error {
	if e, ok := mongoerr.As(err); ok {
		return mongoerr.New(e.Code, "Invalid %s :: caused by :: %s", name, e.Message)
	}
	return err
}

type matchStage struct{ f *Filter }

func (s matchStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := in[:0:0]
	for _, d := range in {
		if s.f.Match(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

type projectStage struct{ p *Projection }

func (s projectStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := make([]bson.Raw, len(in))
	for i, d := range in {
		r, err := s.p.apply(d, -1, &evalCtx{root: d, current: d, now: c.now})
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

type sortStage struct{ s *Sort }

func (s sortStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := append([]bson.Raw(nil), in...)
	s.s.SortDocs(out)
	return out, nil
}

type limitStage int64

func (s limitStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	if int64(len(in)) > int64(s) {
		return in[:s], nil
	}
	return in, nil
}

type skipStage int64

func (s skipStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	if int64(len(in)) <= int64(s) {
		return nil, nil
	}
	return in[s:], nil
}

type countStage string

func (s countStage) run(_ *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	if len(in) == 0 {
		return nil, nil
	}
	d := newDoc(32)
	d.add(string(s), vInt32(int32(len(in))))
	return []bson.Raw{d.done()}, nil
}

// $addFields / $set

type addField struct {
	path []string
	e    *Expr
}

type addFieldsStage []addField

func compileAddFields(spec bson.Raw) (stage, error) {
	var s addFieldsStage
	it := iterDoc(spec)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		parts := strings.Split(string(k), ".")
		if err := checkPathParts(parts); err != nil {
			return nil, err
		}
		// A nested document of expressions is flattened into paths, so
		// {a: {b: 1}} merges b into an existing a.
		if v.Type == bson.TypeEmbeddedDocument && !isOperatorDoc(v) && arrayLen(v.Value) > 0 {
			sub, err := compileAddFields(v.Value)
			if err != nil {
				return nil, err
			}
			for _, f := range sub.(addFieldsStage) {
				s = append(s, addField{path: append(append([]string{}, parts...), f.path...), e: f.e})
			}
			continue
		}
		e, err := CompileExpr(v)
		if err != nil {
			return nil, err
		}
		s = append(s, addField{path: parts, e: e})
	}
	return s, nil
}

func (s addFieldsStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
	out := make([]bson.Raw, len(in))
	for i, d := range in {
		root := rawNode(vDoc(d))
		root.load()
		ec := &evalCtx{root: d, current: d, now: c.now}
		for _, f := range s {
			v, err := f.e.evalIn(ec)
			if err != nil {
				return nil, err
			}
			setField(root, f.path, v)
		}
		out[i] = root.encodeDoc(make([]byte, 0, len(d)+32))
	}
	return out, nil
}

// setField sets path to v as $addFields does: through arrays it sets the
// field in every element; a missing v removes the field.
func setField(n *mnode, path []string, v bson.RawValue) {
	if n.typ() == bson.TypeArray {
		n.load()
		for i, k := range n.kids {
			if k.typ() != bson.TypeEmbeddedDocument && k.typ() != bson.TypeArray {
				k = newDocNode()
				n.kids[i] = k
			}
			setField(k, path, v)
		}
		return
	}
	n.load()
	if len(path) == 1 {
		if v.Type == 0 {
			n.remove(path[0])
			return
		}
		n.set(path[0], rawNode(v))
		return
	}
	c := n.child(path[0])
	if c == nil || !c.isContainer() {
		if v.Type == 0 {
			return
		}
		c = newDocNode()
		n.set(path[0], c)
	}
	setField(c, path[1:], v)
}

// $group

type groupAcc struct {
	name string
	op   string
	e    *Expr
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
		switch {
		case strings.Contains(name, "."):
			return nil, mongoerr.New(40235, "The field name '%s' cannot contain '.'", name)
		case strings.HasPrefix(name, "$"):
			return nil, mongoerr.New(40236, "The field name '%s' cannot be an operator name", name)
		case f.Type != bson.TypeEmbeddedDocument:
			return nil, mongoerr.New(40234, "The field '%s' must be an accumulator object", name)
		case arrayLen(f.Value) != 1:
			return nil, mongoerr.New(40238, "The field '%s' must specify one accumulator", name)
		}
		ait := iterDoc(f.Value)
		op, arg, _ := ait.next()
		if !accumulatorNames[string(op)] {
			return nil, mongoerr.New(15952, "unknown group operator '%s'", op)
		}
		if string(op) == "$count" {
			if arg.Type != bson.TypeEmbeddedDocument || arrayLen(arg.Value) != 0 {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "$count takes no arguments, i.e. $count:{}")
			}
			arg = vInt32(1)
		}
		if arg.Type == bson.TypeArray && string(op) != "$push" && string(op) != "$addToSet" {
			return nil, mongoerr.New(40237, "The %s accumulator is a unary operator", op)
		}
		e, err := CompileExpr(arg)
		if err != nil {
			return nil, err
		}
		g.accs = append(g.accs, groupAcc{name: name, op: string(op), e: e})
	}
	if g.id == nil {
		return nil, mongoerr.New(15955, "a group specification must include an _id")
	}
	return g, nil
}

func (g *groupStage) run(c *runCtx, in []bson.Raw) ([]bson.Raw, error) {
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
		id, err := g.id.evalIn(ec)
		if err != nil {
			return nil, err
		}
		if id.Type == 0 {
			id = nullValue
		}
		key = appendKey(key[:0], id)
		gr, ok := groups[string(key)]
		if !ok {
			gr = &group{id: id, accs: make([]accumulator, len(g.accs))}
			for i, a := range g.accs {
				gr.accs[i] = newAccumulator(a.op)
			}
			groups[string(key)] = gr
			order = append(order, gr)
		}
		for i, a := range g.accs {
			v, err := a.e.evalIn(ec)
			if err != nil {
				return nil, err
			}
			gr.accs[i].add(v)
		}
	}
	out := make([]bson.Raw, 0, len(order))
	for _, gr := range order {
		d := newDoc(64)
		d.add("_id", gr.id)
		for i, a := range g.accs {
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
