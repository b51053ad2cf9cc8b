package store

import (
	"slices"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mql"
)

// match collects, under the read lock, the documents of ns that match f in
// natural order (index order is not kept), up to limit (0 = all).
func (s *Store) match(ns Namespace, f *query, limit int64) ([]bson.Raw, Plan, error) {
	var out []bson.Raw
	var plan Plan
	err := s.read(func() error {
		c := s.collLocked(ns)
		if c == nil {
			return nil
		}
		plan = c.scan(f, func(_ int, doc bson.Raw) bool {
			if f.Match(doc) {
				out = append(out, doc)
			}
			return limit <= 0 || int64(len(out)) < limit
		})
		return nil
	})
	return out, plan, err
}

// Find runs a query and returns a point-in-time result: the matching
// documents, sorted, skipped, limited (a negative limit counts as its
// absolute value) and projected. A missing collection yields none.
// Equality, $in and range predicates on the leading field of an index are
// answered through the index.
func (s *Store) Find(ns Namespace, spec FindSpec) ([]bson.Raw, error) {
	docs, _, err := s.find(ns, spec)
	return docs, err
}

// Explain runs a query and reports how it found its documents.
func (s *Store) Explain(ns Namespace, spec FindSpec) (Plan, error) {
	_, plan, err := s.find(ns, spec)
	return plan, err
}

func (s *Store) find(ns Namespace, spec FindSpec) ([]bson.Raw, Plan, error) {
	f, err := compileQuery(spec.Filter)
	if err != nil {
		return nil, Plan{}, err
	}
	var sorter *mql.Sort
	if len(spec.Sort) > 0 {
		if sorter, err = mql.CompileSort(spec.Sort); err != nil {
			return nil, Plan{}, err
		}
	}
	var proj *mql.Projection
	if len(spec.Projection) > 0 {
		if proj, err = mql.CompileProjection(spec.Projection); err != nil {
			return nil, Plan{}, err
		}
	}
	limit, skip := spec.Limit, max(spec.Skip, 0)
	if limit < 0 {
		limit = -limit
	}
	want := int64(0)
	if sorter == nil && limit > 0 {
		want = skip + limit
	}
	docs, plan, err := s.match(ns, f, want)
	if err != nil {
		return nil, plan, err
	}
	if sorter != nil {
		sort.SliceStable(docs, func(i, j int) bool { return sorter.Compare(docs[i], docs[j]) < 0 })
	}
	docs = window(docs, skip, limit)
	if proj != nil {
		for i, d := range docs {
			_, pos := f.MatchPositional(d)
			if docs[i], err = proj.Apply(d, pos); err != nil {
				return nil, plan, err
			}
		}
	}
	return docs, plan, nil
}

func window[T any](s []T, skip, limit int64) []T {
	if skip >= int64(len(s)) {
		return nil
	}
	s = s[skip:]
	if limit > 0 && limit < int64(len(s)) {
		s = s[:limit]
	}
	return s
}

// Count counts the matching documents after skip, up to limit (0 = all).
func (s *Store) Count(ns Namespace, filter bson.Raw, skip, limit int64) (int64, error) {
	f, err := compileQuery(filter)
	if err != nil {
		return 0, err
	}
	if limit < 0 {
		limit = -limit
	}
	skip = max(skip, 0)
	want := int64(0)
	if limit > 0 {
		want = skip + limit
	}
	var n int64
	err = s.read(func() error {
		c := s.collLocked(ns)
		if c == nil {
			return nil
		}
		if len(filter) <= 5 && want == 0 { // empty filter: every document
			n = int64(c.live)
			return nil
		}
		c.scan(f, func(_ int, doc bson.Raw) bool {
			if f.Match(doc) {
				n++
			}
			return want == 0 || n < want
		})
		return nil
	})
	n = max(n-skip, 0)
	if limit > 0 {
		n = min(n, limit)
	}
	return n, err
}

// Distinct returns the distinct values of key among the matching documents,
// in MongoDB's sort order; array values contribute their elements.
func (s *Store) Distinct(ns Namespace, key string, filter bson.Raw) ([]bson.RawValue, error) {
	f, err := compileQuery(filter)
	if err != nil {
		return nil, err
	}
	docs, _, err := s.match(ns, f, 0)
	if err != nil {
		return nil, err
	}
	path := strings.Split(key, ".")
	var vals []bson.RawValue
	for _, d := range docs {
		vs, _, _ := pathValues(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}, path, nil)
		for _, v := range vs {
			if v.Type != bson.TypeNull && v.Type != bson.TypeUndefined || hasNull(d, path) {
				vals = append(vals, v)
			}
		}
	}
	sort.SliceStable(vals, func(i, j int) bool { return mql.Compare(vals[i], vals[j]) < 0 })
	return slices.CompactFunc(vals, func(a, b bson.RawValue) bool { return mql.Compare(a, b) == 0 }), nil
}

// hasNull reports whether the document holds an explicit null at path (a
// missing field contributes nothing to distinct, an explicit null does).
func hasNull(doc bson.Raw, path []string) bool {
	v, err := doc.LookupErr(path...)
	return err == nil && v.Type == bson.TypeNull
}

// Aggregate runs a pipeline over the collection's documents. A leading
// $match selects its input through an index when it can; $lookup reads
// other collections of ns.DB.
func (s *Store) Aggregate(ns Namespace, stages []bson.Raw) ([]bson.Raw, error) {
	p, err := mql.CompilePipeline(stages)
	if err != nil {
		return nil, err
	}
	var f *query
	if len(stages) > 0 {
		if m, err := stages[0].LookupErr("$match"); err == nil && m.Type == bson.TypeEmbeddedDocument {
			f, _ = compileQuery(m.Document()) // the pipeline applies the $match again
		}
	}
	if f == nil {
		if f, err = compileQuery(nil); err != nil {
			return nil, err
		}
	}
	input, _, err := s.match(ns, f, 0)
	if err != nil {
		return nil, err
	}
	return p.Run(env{s: s, db: ns.DB}, input)
}

// env gives a pipeline the other collections of a database.
type env struct {
	s  *Store
	db string
}

func (e env) Collection(name string) ([]bson.Raw, error) {
	var docs []bson.Raw
	err := e.s.read(func() error {
		if c := e.s.collLocked(Namespace{DB: e.db, Coll: name}); c != nil {
			docs = c.docs()
		}
		return nil
	})
	return docs, err
}
