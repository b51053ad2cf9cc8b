package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// CompileFilterCollated compiles a filter whose string comparisons
// ($eq, $ne, $gt..., $in, $nin, $all, inside $elemMatch, $not and the
// logical operators, and the comparison expressions of $expr) follow
// collation c, as mongod's do; $regex, $type, $exists, $size and $mod do
// not depend on a collation, as in mongod. A nil c is CompileFilter.
func CompileFilterCollated(filter bson.Raw, c *Collation) (*Filter, error) {
	f, err := CompileFilter(filter)
	if err != nil || c == nil {
		return f, err
	}
	for i, n := range f.top {
		f.top[i] = collateNode(n, c)
	}
	switch len(f.top) {
	case 0:
	case 1:
		f.root = f.top[0]
	default:
		f.root = andNode(f.top)
	}
	f.coll = c
	return f, nil
}

// Collation is the collation the filter was compiled with (nil: simple).
func (f *Filter) Collation() *Collation {
	if f == nil {
		return nil
	}
	return f.coll
}

// collateNode returns n comparing under c: operands become collation
// keys (ops are changed in place, value nodes are replaced).
func collateNode(n node, c *Collation) node {
	switch x := n.(type) {
	case andNode:
		collateNodes(x, c)
	case orNode:
		collateNodes(x, c)
	case norNode:
		collateNodes(x, c)
	case notNode:
		return notNode{n: collateNode(x.n, c)}
	case *fieldNode:
		collateOp(x.op, c)
	case exprMatchNode:
		return exprMatchNode{e: x.e, coll: c}
	}
	return n
}

func collateNodes(ns []node, c *Collation) {
	for i, n := range ns {
		ns[i] = collateNode(n, c)
	}
}

func collateOp(op valueOp, c *Collation) {
	switch o := op.(type) {
	case *eqOp:
		o.orig, o.v, o.coll = o.v, c.Transform(o.v), c
	case *cmpOp:
		o.v, o.coll = c.Transform(o.v), c
	case *inOp:
		o.orig = o.vals
		o.vals = make([]bson.RawValue, len(o.orig))
		for i, v := range o.orig {
			o.vals[i] = c.Transform(v)
		}
		if o.set != nil {
			o.set = make(map[string]struct{}, len(o.vals))
			for _, v := range o.vals {
				o.set[string(appendKey(nil, v))] = struct{}{}
			}
		}
		o.coll = c
	case *elemMatchOp:
		o.sub = collateNode(o.sub, c)
	}
}

// collatedStages are the stages that run under a non-simple collation:
// those no collation changes, and those whose expressions compare under
// it (evalCtx.coll: $eq, $in, ... compare collation keys; operators that
// would return keys are refused when they run).
var collatedStages = map[string]bool{
	"$skip": true, "$limit": true, "$count": true, "$unset": true, "$sample": true,
	"$project": true, "$addFields": true, "$set": true, "$replaceRoot": true, "$replaceWith": true,
	"$unwind": true, "$group": true,
}

// collatedAccumulators are the $group accumulators that compare no values.
var collatedAccumulators = map[string]bool{
	"$sum": true, "$avg": true, "$count": true, "$first": true, "$last": true, "$push": true,
	"$stdDevPop": true, "$stdDevSamp": true, "$mergeObjects": true, "$firstN": true, "$lastN": true,
	"$min": true, "$max": true, "$addToSet": true,
}

// CompilePipelineCollated compiles an aggregation pipeline whose $match
// and $sort stages, $group keys and comparison expressions follow
// collation c (nil: CompilePipeline). The stages and accumulators whose
// comparisons here would stay binary ($lookup, $bucket, $setWindowFields,
// $facet, $min, $max, $addToSet, ...) are refused under a non-simple
// collation with CommandNotSupported, rather than run binary.
func CompilePipelineCollated(stages []bson.Raw, c *Collation) (*Pipeline, error) {
	p, err := CompilePipeline(stages)
	if err != nil || c == nil {
		return p, err
	}
	for i, name := range p.names {
		switch st := p.stages[i].(type) {
		case matchStage:
			f, err := CompileFilterCollated(lookup(stages[i], "$match").Value, c)
			if err != nil {
				return nil, err
			}
			p.stages[i] = matchStage{f}
		case sortStage:
			s, err := CompileSortCollated(lookup(stages[i], "$sort").Value, c)
			if err != nil {
				return nil, err
			}
			st.s = s
			p.stages[i] = st
		case *groupStage:
			for _, a := range st.accs {
				if !collatedAccumulators[a.op] {
					return nil, mongoerr.New(mongoerr.CommandNotSupported, "%s with a non-simple collation is not supported by this server", a.op)
				}
			}
		default:
			if !collatedStages[name] {
				return nil, mongoerr.New(mongoerr.CommandNotSupported, "%s with a non-simple collation is not supported by this server", name)
			}
		}
	}
	p.coll = c
	return p, nil
}

// compareColl is Compare under c (nil: binary).
func compareColl(c *Collation, a, b bson.RawValue) int {
	if c == nil {
		return Compare(a, b)
	}
	return Compare(c.Transform(a), c.Transform(b))
}

// WithCollation makes the update's comparisons ($min, $max, $addToSet,
// $pull, $pullAll, $push's $sort) follow c, as mongod's do under a
// command's collation. Array filters and pipeline updates keep comparing
// binary, so they are refused: the caller must not use them under c.
func (u *Update) WithCollation(c *Collation) error {
	if c == nil {
		return nil
	}
	if u.pipeline != nil {
		return mongoerr.New(mongoerr.CommandNotSupported, "a pipeline update with a non-simple collation is not supported by this server")
	}
	if len(u.filters) > 0 {
		return mongoerr.New(mongoerr.CommandNotSupported, "arrayFilters with a non-simple collation is not supported by this server")
	}
	for _, e := range u.entries {
		e.coll = c
		if e.pull != nil {
			e.pull = collateNode(e.pull, c)
		}
		if p := e.push; p != nil {
			p.coll = c
			if p.sort != nil {
				p.sort.coll = c
				for i := range p.sort.keys {
					p.sort.keys[i].coll = c
				}
			}
		}
	}
	return nil
}
