package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// maxFilterDepth bounds the nesting of $and/$or/$nor/$elemMatch/$not, as
// MongoDB's "exceeded maximum query tree depth of 100" does.
const maxFilterDepth = 100

// Filter is a compiled query filter. It is safe for concurrent use.
type Filter struct {
	root node // nil matches everything
	top  []node
	coll *Collation // nil: simple (filter_collation.go)
}

// node is one compiled predicate over a document.
type node interface {
	// match reports whether doc matches; when pos is not nil and a
	// predicate matched through an array, the index of the array element
	// that matched is stored in *pos if *pos is still -1.
	match(doc bson.Raw, pos *int) bool
}

// CompileFilter compiles a query filter. A nil or empty filter matches
// every document. Malformed filters fail with the *mongoerr.Error MongoDB
// returns, e.g. BadValue "unknown operator: $foo".
func CompileFilter(filter bson.Raw) (*Filter, error) {
	if len(filter) == 0 {
		return &Filter{}, nil
	}
	if err := filter.Validate(); err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid filter document: %v", err)
	}
	nodes, err := parseFilterDoc(filter, 0)
	if err != nil {
		return nil, err
	}
	f := &Filter{top: nodes}
	switch len(nodes) {
	case 0:
	case 1:
		f.root = nodes[0]
	default:
		f.root = andNode(nodes)
	}
	return f, nil
}

// Match reports whether doc matches the filter.
func (f *Filter) Match(doc bson.Raw) bool {
	if f == nil || f.root == nil {
		return true
	}
	return f.root.match(doc, nil)
}

// MatchPositional matches doc and also reports, for the positional `$`
// update and projection operators, the index of the array element that
// made the filter match (-1 if no array was involved).
func (f *Filter) MatchPositional(doc bson.Raw) (matched bool, arrayIndex int) {
	if f == nil || f.root == nil {
		return true, -1
	}
	pos := -1
	if !f.root.match(doc, &pos) {
		return false, -1
	}
	return true, pos
}

// Predicate is a top-level constraint on one field that an index can
// serve: Op is "$eq", "$in", "$gt", "$gte", "$lt" or "$lte". Comparison
// operators match only values in the TypeBracket of their bound. A
// predicate selects a superset of the documents the filter matches; the
// caller must still run Match on each candidate.
type Predicate struct {
	Path   string
	Op     string
	Values []bson.RawValue
}

// Predicates returns the top-level per-field constraints of the filter
// (those joined by the implicit or explicit top-level $and). Every
// predicate returned is safe for an index lookup: the documents whose
// index keys satisfy it include every document the filter matches.
// Constraints an index cannot answer alone are left out entirely, never
// reported in part: equalities on null or undefined (they also match a
// missing field), on arrays (they also match the whole array) and on
// regular expressions, and any $in whose list holds one of those (so
// {a: {$in: [1, null]}} yields no predicate on a). An $in with an empty
// list is reported with no Values: it matches nothing.
func (f *Filter) Predicates() []Predicate {
	if f == nil {
		return nil
	}
	var out []Predicate
	for _, n := range flattenAnd(f.top) {
		fn, ok := n.(*fieldNode)
		if !ok {
			continue
		}
		switch op := fn.op.(type) {
		case *eqOp:
			if indexable(op.v) {
				out = append(out, Predicate{Path: fn.dotted, Op: "$eq", Values: []bson.RawValue{op.v}})
			}
		case *inOp:
			if len(op.res) > 0 || op.hasNull {
				continue
			}
			ok := true
			for _, v := range op.vals {
				ok = ok && indexable(v)
			}
			if ok {
				out = append(out, Predicate{Path: fn.dotted, Op: "$in", Values: op.vals})
			}
		case *cmpOp:
			if indexable(op.v) && !isNaN(op.v) && op.v.Type != bson.TypeMinKey && op.v.Type != bson.TypeMaxKey {
				out = append(out, Predicate{Path: fn.dotted, Op: op.name, Values: []bson.RawValue{op.v}})
			}
		}
	}
	return out
}

func indexable(v bson.RawValue) bool {
	switch v.Type {
	case 0, bson.TypeNull, bson.TypeUndefined, bson.TypeArray, bson.TypeRegex:
		return false
	}
	return true
}

// EqualityFields returns the top-level equality constraints ({a: 1},
// {a: {$eq: 1}}, and those inside a top-level $and) as a document ready to
// seed an upserted document: dotted paths become embedded documents
// ({"a.b": 1} gives {a: {b: 1}}), and _id, when constrained, comes first.
// Values are bson.RawValue; embedded levels are bson.D.
func (f *Filter) EqualityFields() bson.D {
	if f == nil {
		return nil
	}
	var out bson.D
	for _, n := range flattenAnd(f.top) {
		fn, ok := n.(*fieldNode)
		if !ok {
			continue
		}
		if strings.Contains(fn.dotted, "$") {
			continue
		}
		switch op := fn.op.(type) {
		case *eqOp:
			v := op.v
			if op.coll != nil {
				v = op.orig
			}
			out = setPathD(out, fn.path, v)
		case *inOp:
			// {$in: [x]} is an equality.
			if len(op.vals) == 1 && len(op.res) == 0 && !op.hasNull {
				v := op.vals[0]
				if op.coll != nil {
					v = op.orig[0]
				}
				out = setPathD(out, fn.path, v)
			}
		}
	}
	for i, e := range out {
		if e.Key == "_id" && i > 0 {
			out = append(bson.D{e}, append(out[:i:i], out[i+1:]...)...)
			break
		}
	}
	return out
}

// setPathD sets path to v in d, creating embedded documents; a path that
// collides with an existing non-document value is left alone.
func setPathD(d bson.D, path []string, v bson.RawValue) bson.D {
	for i := range d {
		if d[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			return d
		}
		sub, ok := d[i].Value.(bson.D)
		if !ok {
			return d
		}
		d[i].Value = setPathD(sub, path[1:], v)
		return d
	}
	if len(path) == 1 {
		return append(d, bson.E{Key: path[0], Value: v})
	}
	return append(d, bson.E{Key: path[0], Value: setPathD(nil, path[1:], v)})
}

// flattenAnd lists the conjuncts of nodes: nested $and and single-clause
// $or are opened, as MongoDB's query normalization does.
func flattenAnd(nodes []node) []node {
	var out []node
	for _, n := range nodes {
		switch x := n.(type) {
		case andNode:
			out = append(out, flattenAnd(x)...)
			continue
		case orNode:
			if len(x) == 1 {
				out = append(out, flattenAnd([]node(x))...)
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// fieldNode applies a value predicate to the values a dotted path reaches.
type fieldNode struct {
	dotted string
	path   []string
	index  []int // index[i] >= 0 when path[i] can be an array index
	op     valueOp
}

// valueOp is a predicate over one value reached by a path. expanded is
// true for the elements of an array reached at the end of the path
// (MongoDB matches both the array and each of its elements). An op that
// picks an array element (such as $elemMatch) returns its index, else -1.
type valueOp interface {
	test(v bson.RawValue, expanded bool) (bool, int)
}

func newFieldNode(path string, op valueOp) *fieldNode {
	parts := strings.Split(path, ".")
	idx := make([]int, len(parts))
	for i, p := range parts {
		idx[i] = -1
		if n, ok := arrayIndex(p); ok {
			idx[i] = n
		}
	}
	return &fieldNode{dotted: path, path: parts, index: idx, op: op}
}

func (n *fieldNode) match(doc bson.Raw, pos *int) bool {
	ok, i := n.walk(vDoc(doc), 0, -1)
	if ok && pos != nil && *pos < 0 && i >= 0 {
		*pos = i
	}
	return ok
}

func firstIndex(outer, inner int) int {
	if outer >= 0 {
		return outer
	}
	return inner
}

// walk visits the values that n.path[depth:] reaches from v, MongoDB
// style: embedded documents are entered, arrays of documents are
// traversed element by element, a numeric component indexes an array, and
// a path that runs into a scalar, or past the end, reaches "missing".
func (n *fieldNode) walk(v bson.RawValue, depth, arrIdx int) (bool, int) {
	if depth == len(n.path) {
		if ok, i := n.op.test(v, false); ok {
			return true, firstIndex(arrIdx, i)
		}
		if v.Type != bson.TypeArray {
			return false, -1
		}
		it := iterDoc(v.Value)
		for i := 0; ; i++ {
			_, e, ok := it.next()
			if !ok {
				return false, -1
			}
			if ok, j := n.op.test(e, true); ok {
				return true, firstIndex(arrIdx, firstIndex(j, i))
			}
		}
	}
	comp := n.path[depth]
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		return n.walk(lookup(v.Value, comp), depth+1, arrIdx)
	case bson.TypeArray:
		if want := n.index[depth]; want >= 0 {
			visited := false
			it := iterDoc(v.Value)
			for i := 0; ; i++ {
				_, e, ok := it.next()
				if !ok {
					break
				}
				if i == want {
					visited = true
					if ok, j := n.walk(e, depth+1, firstIndex(arrIdx, i)); ok {
						return true, j
					}
					continue
				}
				if e.Type == bson.TypeEmbeddedDocument {
					if f := lookup(e.Value, comp); f.Type != 0 {
						visited = true
						if ok, j := n.walk(f, depth+1, firstIndex(arrIdx, i)); ok {
							return true, j
						}
					}
				}
			}
			if !visited {
				return n.walk(missing, depth+1, arrIdx)
			}
			return false, -1
		}
		anyDoc := false
		it := iterDoc(v.Value)
		for i := 0; ; i++ {
			_, e, ok := it.next()
			if !ok {
				break
			}
			if e.Type != bson.TypeEmbeddedDocument {
				continue
			}
			anyDoc = true
			if ok, j := n.walk(lookup(e.Value, comp), depth+1, firstIndex(arrIdx, i)); ok {
				return true, j
			}
		}
		if !anyDoc {
			return n.walk(missing, depth+1, arrIdx)
		}
		return false, -1
	default:
		if depth+1 == len(n.path) {
			ok, _ := n.op.test(missing, false)
			return ok, arrIdx
		}
		return n.walk(missing, depth+1, arrIdx)
	}
}

// Value operators.
