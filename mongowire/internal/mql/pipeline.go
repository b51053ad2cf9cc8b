package mql

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
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
		"$facet": true, "$sortByCount": true, "$unionWith": true, "$bucket": true, "$bucketAuto": true, "$sample": true,
	}
	updateStages = map[string]bool{
		"$addFields": true, "$set": true, "$project": true, "$unset": true,
		"$replaceRoot": true, "$replaceWith": true,
	}
	knownStages = map[string]bool{
		"$out": true, "$merge": true,
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
	case "$bucket":
		return compileBucket(v)
	case "$bucketAuto":
		return compileBucketAuto(v)
	case "$sample":
		return compileSample(v)
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
		for i := range n.len() {
			k := n.at(i)
			if !k.isContainer() {
				k = newDocNode()
				n.setAt(i, k)
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
