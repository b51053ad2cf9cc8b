package store

import (
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Plan describes how a query found its documents, like a tiny explain.
type Plan struct {
	Index        string // the index used, "" for a collection scan
	KeysExamined int
	DocsExamined int
	// SortedByIndex is set when walking Index gave the documents in the
	// requested sort order, so no sort stage ran (and a limit stopped the
	// walk early); Backward when that walk went from the end of the index
	// to its start.
	SortedByIndex bool
	Backward      bool
}

// bracket is the position of a BSON type in MongoDB's comparison order;
// types that compare with each other (numbers; strings and symbols; null and
// undefined) share a bracket. A range over an index never leaves its bound's
// bracket, since comparison operators only match values of the same bracket.
func bracket(t bson.Type) int {
	switch t {
	case bson.TypeMinKey:
		return 0
	case bson.TypeNull, bson.TypeUndefined:
		return 1
	case bson.TypeDouble, bson.TypeInt32, bson.TypeInt64, bson.TypeDecimal128:
		return 2
	case bson.TypeString, bson.TypeSymbol:
		return 3
	case bson.TypeEmbeddedDocument:
		return 4
	case bson.TypeArray:
		return 5
	case bson.TypeBinary:
		return 6
	case bson.TypeObjectID:
		return 7
	case bson.TypeBoolean:
		return 8
	case bson.TypeDateTime:
		return 9
	case bson.TypeTimestamp:
		return 10
	case bson.TypeRegex:
		return 11
	case bson.TypeDBPointer:
		return 12
	case bson.TypeJavaScript:
		return 13
	case bson.TypeCodeWithScope:
		return 14
	case bson.TypeMaxKey:
		return 100
	}
	return 50
}

// access is one way to find candidates through an index.
type access struct {
	ix     *index
	points []bson.RawValue // equality / $in values
	lo, hi *bson.RawValue  // range bounds
	loIncl bool
	hiIncl bool
	rank   int // lower is better
}

// choose picks the best index access for the filter's predicates, or nil
// for a collection scan.
func (c *collection) choose(preds []mql.Predicate, coll *mql.Collation) *access {
	var best *access
	ranges := map[string]*access{}
	consider := func(a *access) {
		if best == nil || a.rank < best.rank {
			best = a
		}
	}
	for _, p := range preds {
		ix := c.leading(p, preds, coll)
		if ix == nil {
			continue
		}
		rank := 4
		if ix == c.indexes[0] {
			rank = 0
		} else if ix.unique() && len(ix.paths) == 1 {
			rank = 1
		}
		if ix.hashed {
			pts := make([]bson.RawValue, len(p.Values))
			for i, v := range p.Values {
				pts[i] = hashKey(v)
			}
			consider(&access{ix: ix, points: pts, rank: rank + 1})
			continue
		}
		switch p.Op {
		case "$eq":
			if len(p.Values) == 1 {
				consider(&access{ix: ix, points: p.Values, rank: rank})
			}
		case "$in": // an empty list matches nothing: no points to look up
			consider(&access{ix: ix, points: append([]bson.RawValue{}, p.Values...), rank: rank + 1})
		case "$gt", "$gte", "$lt", "$lte":
			if len(p.Values) != 1 || ix.dirs[0] < 0 {
				continue
			}
			a := ranges[p.Path]
			if a == nil {
				a = &access{ix: ix, rank: rank + 3}
				ranges[p.Path] = a
			}
			v := p.Values[0]
			switch p.Op {
			case "$gt", "$gte":
				if a.lo == nil || mql.Compare(v, *a.lo) > 0 {
					a.lo, a.loIncl = &v, p.Op == "$gte"
				}
			default:
				if a.hi == nil || mql.Compare(v, *a.hi) < 0 {
					a.hi, a.hiIncl = &v, p.Op == "$lte"
				}
			}
		}
	}
	for _, a := range ranges {
		switch {
		case a.lo != nil && a.hi != nil && a.ix.multikey:
			a.hi = nil // {$gt: 5, $lt: 10} matches [1, 20]: keep one bound
		case a.lo != nil && a.hi != nil:
			a.rank--
		}
		consider(a)
	}
	return best
}

// leading returns an index whose first field is path, preferring _id, then
// unique single-field indexes. A partial index is used only when the
// query's predicates imply its filter; paths through numeric components
// (positional array paths) are not used. An index whose collation is not
// the query's serves only predicates without strings, as in mongod.
func (c *collection) leading(p mql.Predicate, preds []mql.Predicate, coll *mql.Collation) *index {
	path := p.Path
	var found *index
	for _, ix := range c.indexes {
		if ix.spec.Key[0].Key != path || ix.hidden() || ix.text != nil || !ix.answers(preds) {
			continue
		}
		if !ix.coll.SameAs(coll) && slices.ContainsFunc(p.Values, mql.HasStrings) {
			continue
		}
		if ix.hashed && p.Op != "$eq" && p.Op != "$in" {
			continue // a hash keeps no order
		}
		if slices.ContainsFunc(ix.paths[0], func(s string) bool { _, err := strconv.Atoi(s); return err == nil }) {
			continue
		}
		if found == nil || ix.unique() && !found.unique() || len(ix.paths) < len(found.paths) && ix.unique() == found.unique() {
			found = ix
		}
	}
	if strings.HasPrefix(path, "$") {
		return nil
	}
	return found
}

// rids collects the record ids the access finds, sorted and without
// duplicates, and how many keys it examined.
func (a *access) rids() ([]uint64, int) {
	var out []uint64
	keys := a.walk(false, func(e *entry) bool {
		out = append(out, e.rid)
		return true
	})
	slices.Sort(out)
	return slices.Compact(out), keys
}

// walk calls fn with the entries the access finds, in index order, or in
// the opposite order when reverse is set, until fn returns false. It
// returns how many keys it examined. Equal points are visited once.
func (a *access) walk(reverse bool, fn func(e *entry) bool) int {
	keys := 0
	t := a.ix.tree
	if a.points != nil {
		pts := slices.Clone(a.points)
		slices.SortFunc(pts, func(x, y bson.RawValue) int { return compareValues(x, y) * a.ix.dirs[0] })
		pts = slices.CompactFunc(pts, func(x, y bson.RawValue) bool { return compareValues(x, y) == 0 })
		if reverse {
			slices.Reverse(pts)
		}
		for _, v := range pts {
			stopped := false
			each := func(e *entry) bool {
				keys++
				if compareValues(e.k0, v) != 0 {
					return false
				}
				stopped = !fn(e)
				return !stopped
			}
			if reverse {
				t.descend(&entry{k0: v, rid: ridMax}, each) // after every entry with key v
			} else {
				t.ascend(&entry{k0: v}, each) // before every entry with key v
			}
			if stopped {
				break
			}
		}
		return keys
	}
	// A range (only on ascending leading fields) stays in its bound's
	// bracket: entries of other brackets are passed over or end the walk.
	b := 0
	if a.lo != nil {
		b = bracket(a.lo.Type)
	} else {
		b = bracket(a.hi.Type)
	}
	if !reverse {
		var from *entry
		if a.lo != nil {
			from = &entry{k0: *a.lo}
			if !a.loIncl {
				from.rid = ridMax
			}
		}
		t.ascend(from, func(e *entry) bool {
			keys++
			switch eb := bracket(e.k0.Type); {
			case eb < b:
				return true
			case eb > b:
				return false
			}
			if a.hi != nil {
				c := mql.Compare(e.k0, *a.hi)
				if c > 0 || c == 0 && !a.hiIncl {
					return false
				}
			}
			return fn(e)
		})
		return keys
	}
	var from *entry
	if a.hi != nil {
		from = &entry{k0: *a.hi}
		if a.hiIncl {
			from.rid = ridMax
		}
	}
	t.descend(from, func(e *entry) bool {
		keys++
		switch eb := bracket(e.k0.Type); {
		case eb > b:
			return true
		case eb < b:
			return false
		}
		if a.lo != nil {
			c := mql.Compare(e.k0, *a.lo)
			if c < 0 || c == 0 && !a.loIncl {
				return false
			}
		}
		return fn(e)
	})
	return keys
}

// scan calls fn, in natural order, with every document the filter may
// match: the candidates of the chosen index, or every document. fn returns
// false to stop. The plan says what was examined.
func (c *collection) scan(q *query, fn func(p int, doc bson.Raw) bool) Plan {
	var plan Plan
	a := c.choose(q.preds, q.coll)
	if a == nil {
		for p, r := range c.recs {
			if r.doc == nil {
				continue
			}
			plan.DocsExamined++
			if !fn(p, r.doc) {
				break
			}
		}
		return plan
	}
	rids, keys := a.rids()
	plan.Index, plan.KeysExamined = a.ix.spec.Name, keys
	for _, rid := range rids {
		p := c.pos(rid)
		if p < 0 {
			continue
		}
		plan.DocsExamined++
		if !fn(p, c.recs[p].doc) {
			break
		}
	}
	return plan
}

// query is a compiled filter and the predicates an index may answer.
type query struct {
	*mql.Filter
	preds []mql.Predicate
	coll  *mql.Collation // nil: simple
}

// compileQuery compiles a filter under a collation (nil: simple); its
// index predicates are mql's Predicates, which leave out every
// constraint an index cannot answer alone (null, arrays, regexes, and
// $in lists holding them), and hold collation keys for strings.
func compileQuery(filter bson.Raw, coll *mql.Collation) (*query, error) {
	f, err := mql.CompileFilterCollated(filter, coll)
	if err != nil {
		return nil, err
	}
	return &query{Filter: f, preds: f.Predicates(), coll: coll}, nil
}

// collationFor resolves the collation of a query on ns: the one the
// command gives (given.Type != 0), else the collection's default. A view
// has its own default (simple unless it was created with one, whatever
// its source's) and refuses another, as mongod does.
func (s *Store) collationFor(ns Namespace, given bson.RawValue) (*mql.Collation, error) {
	var def *mql.Collation
	isView := false
	_ = s.read(func() error {
		if c := s.collLocked(ns); c != nil {
			def, isView = c.coll, c.view != nil
		}
		return nil
	})
	if given.Type == 0 || given.Type == bson.TypeNull {
		return def, nil
	}
	coll, err := mql.ParseCollation(given)
	if err != nil {
		return nil, err
	}
	if isView && !coll.SameAs(def) {
		return nil, mongoerr.New(167, "Cannot override a view's default collation")
	}
	return coll, nil
}
