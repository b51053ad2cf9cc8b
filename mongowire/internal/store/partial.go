package store

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// clause is one conjunct of a partialFilterExpression the planner
// understands: an equality, $in, range or {$exists: true} on a path.
type clause struct {
	path   string
	op     string // "$eq", "$in", "$gt", "$gte", "$lt", "$lte", "$exists"
	values []bson.RawValue
}

// partialClauses splits a partialFilterExpression into clauses, or reports
// false when it holds anything else (the index then answers no query).
func partialClauses(filter bson.Raw) ([]clause, bool) {
	var out []clause
	elems, err := filter.Elements()
	if err != nil {
		return nil, false
	}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if k == "$and" {
			arr, ok := v.ArrayOK()
			if !ok {
				return nil, false
			}
			vals, _ := arr.Values()
			for _, sub := range vals {
				d, ok := sub.DocumentOK()
				if !ok {
					return nil, false
				}
				cs, ok := partialClauses(d)
				if !ok {
					return nil, false
				}
				out = append(out, cs...)
			}
			continue
		}
		if k == "" || k[0] == '$' {
			return nil, false
		}
		d, ok := v.DocumentOK()
		if !ok {
			if !indexable(v) {
				return nil, false
			}
			out = append(out, clause{path: k, op: "$eq", values: []bson.RawValue{v}})
			continue
		}
		ops, _ := d.Elements()
		if len(ops) == 0 {
			return nil, false
		}
		for _, o := range ops {
			ov := o.Value()
			switch op := o.Key(); op {
			case "$eq", "$gt", "$gte", "$lt", "$lte":
				if !indexable(ov) {
					return nil, false
				}
				out = append(out, clause{path: k, op: op, values: []bson.RawValue{ov}})
			case "$in":
				arr, ok := ov.ArrayOK()
				if !ok {
					return nil, false
				}
				vals, _ := arr.Values()
				if slices.ContainsFunc(vals, func(x bson.RawValue) bool { return !indexable(x) }) {
					return nil, false
				}
				out = append(out, clause{path: k, op: op, values: vals})
			case "$exists":
				if !truthy(ov) {
					return nil, false
				}
				out = append(out, clause{path: k, op: op})
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// impliedBy reports whether every document satisfying the predicates
// satisfies the clause: some predicate on the same path confines the
// field's values to ones the clause accepts.
func (c clause) impliedBy(preds []mql.Predicate) bool {
	for _, p := range preds {
		if p.Path == c.path && c.accepts(p) {
			return true
		}
	}
	return false
}

func (c clause) accepts(p mql.Predicate) bool {
	switch p.Op {
	case "$eq", "$in":
		// Every value the predicate allows must satisfy the clause (an
		// empty $in matches nothing, so it implies anything).
		for _, v := range p.Values {
			if !c.acceptsValue(v) {
				return false
			}
		}
		return true
	case "$gt", "$gte", "$lt", "$lte":
		if len(p.Values) != 1 {
			return false
		}
		w := p.Values[0]
		if c.op == "$exists" {
			return true // a range only matches values of its bound's type
		}
		if len(c.values) != 1 || bracket(w.Type) != bracket(c.values[0].Type) {
			return false
		}
		cmp := mql.Compare(w, c.values[0])
		lower := p.Op == "$gt" || p.Op == "$gte"
		switch c.op {
		case "$gt":
			return lower && (cmp > 0 || cmp == 0 && p.Op == "$gt")
		case "$gte":
			return lower && cmp >= 0
		case "$lt":
			return !lower && (cmp < 0 || cmp == 0 && p.Op == "$lt")
		case "$lte":
			return !lower && cmp <= 0
		}
	}
	return false
}

// acceptsValue reports whether a field holding v satisfies the clause.
func (c clause) acceptsValue(v bson.RawValue) bool {
	if !indexable(v) {
		return false
	}
	switch c.op {
	case "$exists":
		return true
	case "$eq", "$in":
		return slices.ContainsFunc(c.values, func(x bson.RawValue) bool { return mql.Compare(v, x) == 0 })
	}
	b := c.values[0]
	if bracket(v.Type) != bracket(b.Type) {
		return false
	}
	cmp := mql.Compare(v, b)
	switch c.op {
	case "$gt":
		return cmp > 0
	case "$gte":
		return cmp >= 0
	case "$lt":
		return cmp < 0
	case "$lte":
		return cmp <= 0
	}
	return false
}

// answers reports whether the index holds every document a query with
// these predicates can match: always for a full index; for a partial one,
// when the predicates imply each clause of its filter.
func (ix *index) answers(preds []mql.Predicate) bool {
	if ix.partial == nil {
		return true
	}
	if !ix.partialOK {
		return false
	}
	for _, c := range ix.partialClauses {
		if !c.impliedBy(preds) {
			return false
		}
	}
	return true
}

// indexable reports whether a value in a partial filter is one the clause
// logic can reason about: values whose matching rules reach beyond equal
// keys (null matches missing fields, arrays match whole arrays, regexes
// match strings) make the filter too complex to imply.
func indexable(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeNull, bson.TypeUndefined, bson.TypeArray, bson.TypeRegex, bson.TypeMinKey, bson.TypeMaxKey, 0:
		return false
	}
	return true
}
