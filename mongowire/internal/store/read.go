package store

import (
	"container/heap"
	"slices"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// match collects, under the read lock, the documents of ns that match f in
// natural order (index order is not kept), up to limit (0 = all).
func (s *Store) match(rd *Txn, ns Namespace, f *query, limit int64) ([]bson.Raw, Plan, error) {
	var out []bson.Raw
	var plan Plan
	err := s.read(func() error {
		c := s.collLocked(ns)
		if c == nil {
			return nil
		}
		if o := s.overlayLocked(rd, ns); o != nil { // a transaction is open on ns (txn.go)
			o.each(c, func(doc bson.Raw, _ uint64, _ bool) bool {
				if f.Match(doc) {
					out = append(out, doc)
				}
				return limit <= 0 || int64(len(out)) < limit
			})
			plan = Plan{DocsExamined: c.live}
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

// matchSorted answers a sorted query by walking an index in sort order,
// when one fits: it needs no sort, and stops once it has want documents
// (0 = all). The filter's own index access is used when it is on the same
// index; when the filter is better served by another index, ok is false
// and the caller sorts.
func (s *Store) matchSorted(rd *Txn, ns Namespace, f *query, sortSpec bson.Raw, want int64) (docs []bson.Raw, plan Plan, ok bool, err error) {
	keys, err := sortKeys(sortSpec)
	if err != nil {
		return nil, Plan{}, false, nil // no index order for this sort
	}
	err = s.read(func() error {
		c := s.collLocked(ns)
		if c == nil {
			ok = true
			return nil
		}
		if s.overlayLocked(rd, ns) != nil {
			return nil // the caller matches through the overlay and sorts
		}
		a := c.choose(f.preds, f.coll)
		var w sortWalk
		if a != nil {
			if w, ok = sortFits(a.ix, keys, f.coll); !ok {
				return nil
			}
		} else if w, ok = c.sortIndex(keys, f.coll); !ok {
			return nil
		}
		docs, plan = c.walkSorted(w, a, f, want)
		return nil
	})
	return docs, plan, ok, err
}

// sortWalk is an index whose order gives a sort's order.
type sortWalk struct {
	ix      *index
	fields  int  // the sort's fields: the first fields of the index
	reverse bool // walk from the end: every sort direction is the opposite of the index's
}

// sortIndex returns an index that fits the sort, preferring the one with
// the fewest fields.
func (c *collection) sortIndex(keys []sortKey, coll *mql.Collation) (sortWalk, bool) {
	var best sortWalk
	found := false
	for _, ix := range c.indexes {
		if ix.hidden() {
			continue
		}
		if w, ok := sortFits(ix, keys, coll); ok && (!found || len(ix.paths) < len(best.ix.paths)) {
			best, found = w, true
		}
	}
	return best, found
}

// sortFits reports whether walking ix, forward or backward, gives the
// documents in the order of the sort: the sort's fields are the index's
// first fields, with all directions equal to the index's or all opposite,
// and the index has exactly one entry per document (not multikey, sparse
// or partial), whose values are the documents' sort keys: its collation
// must be the sort's.
func sortFits(ix *index, keys []sortKey, coll *mql.Collation) (sortWalk, bool) {
	if len(keys) == 0 || len(keys) > len(ix.paths) || ix.multikey || ix.spec.Sparse || ix.partial != nil || ix.text != nil || ix.hashed || !ix.coll.SameAs(coll) {
		return sortWalk{}, false
	}
	w := sortWalk{ix: ix, fields: len(keys)}
	for i, k := range keys {
		if k.path != ix.spec.Key[i].Key || slices.ContainsFunc(ix.paths[i], isNumeric) {
			return sortWalk{}, false
		}
		reverse := k.dir != ix.dirs[i]
		if i == 0 {
			w.reverse = reverse
		} else if reverse != w.reverse {
			return sortWalk{}, false
		}
	}
	return w, true
}

// sortKey is one field of a sort specification.
type sortKey struct {
	path string
	dir  int
}

// sortKeys reads a sort specification that mql.CompileSort accepted.
func sortKeys(sortSpec bson.Raw) ([]sortKey, error) {
	elems, err := sortSpec.Elements()
	if err != nil {
		return nil, err
	}
	keys := make([]sortKey, len(elems))
	for i, e := range elems {
		if keys[i].dir, err = keyDirection(e.Value()); err != nil {
			return nil, err
		}
		keys[i].path = e.Key()
	}
	return keys, nil
}

// ties reports whether two entries are equal on the sort's fields.
func (w sortWalk) ties(a, b *entry) bool {
	for i := range w.fields {
		av, _ := entryKey(a, i)
		bv, _ := entryKey(b, i)
		if compareValues(av, bv) != 0 {
			return false
		}
	}
	return true
}

// walkSorted collects the documents matching f in sort order by walking
// the index of w (only what a finds, when a is set), until it has want
// documents (0 = all). Documents that tie on the sort's fields are
// returned in natural order, as a stable sort leaves them: the walk keeps
// a run of ties and orders it by record id, so a limit stops at the end of
// a run.
func (c *collection) walkSorted(w sortWalk, a *access, f *query, want int64) ([]bson.Raw, Plan) {
	plan := Plan{Index: w.ix.spec.Name, SortedByIndex: true, Backward: w.reverse}
	var out []bson.Raw
	var run []record // matching documents tied with prev
	var prev *entry
	flush := func() {
		if len(run) > 1 {
			slices.SortFunc(run, func(x, y record) int { return cmpRID(x.rid, y.rid) })
		}
		for _, r := range run {
			out = append(out, r.doc)
		}
		run = run[:0]
	}
	done := func() bool { return want > 0 && int64(len(out)) >= want }
	// When the sort covers every field of the index, a forward walk
	// already gives ties in record id order (the index's last key), and a
	// unique index (or _id) has no ties: each entry is a run of its own.
	noTies := w.fields == len(w.ix.paths) && (!w.reverse || w.ix.unique() || w.ix == c.indexes[0])
	visit := func(e *entry) bool {
		if prev != nil && !noTies && !w.ties(prev, e) {
			flush()
			if done() {
				return false
			}
		}
		prev = e
		p := c.pos(e.rid)
		if p < 0 {
			return true
		}
		plan.DocsExamined++
		if doc := c.recs[p].doc; f.Match(doc) {
			run = append(run, record{rid: e.rid, doc: doc})
		}
		if noTies {
			flush()
			return !done()
		}
		return true
	}
	if a != nil {
		plan.KeysExamined = a.walk(w.reverse, visit)
	} else {
		count := func(e *entry) bool {
			plan.KeysExamined++
			return visit(e)
		}
		if w.reverse {
			w.ix.tree.descend(nil, count)
		} else {
			w.ix.tree.ascend(nil, count)
		}
	}
	flush()
	return out, plan
}

// Find runs a query and returns a point-in-time result: the matching
// documents, sorted, skipped, limited (a negative limit counts as its
// absolute value) and projected. A missing collection yields none.
// Equality, $in and range predicates on the leading field of an index are
// answered through the index.
func (s *Store) Find(ns Namespace, spec FindSpec) ([]bson.Raw, error) {
	docs, _, err := s.find(nil, ns, spec)
	return docs, err
}

// Explain runs a query and reports how it found its documents.
func (s *Store) Explain(ns Namespace, spec FindSpec) (Plan, error) {
	_, plan, err := s.find(nil, ns, spec)
	return plan, err
}

func (s *Store) find(rd *Txn, ns Namespace, spec FindSpec) ([]bson.Raw, Plan, error) {
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return nil, Plan{}, err
	}
	if docs, ok, err := s.viewDocs(rd, ns); ok || err != nil {
		if err == nil {
			docs, err = findIn(docs, spec, coll)
		}
		return docs, Plan{}, err
	}
	if text, rest, ok := splitText(spec.Filter); ok { // text.go
		docs, err := s.findText(rd, ns, spec, text, rest, coll)
		return docs, Plan{}, err
	}
	f, err := compileQuery(spec.Filter, coll)
	if err != nil {
		return nil, Plan{}, err
	}
	var sorter *mql.Sort
	if len(spec.Sort) > 0 {
		if sorter, err = mql.CompileSortCollated(spec.Sort, coll); err != nil {
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
	if limit > 0 {
		want = skip + limit
	}
	var docs []bson.Raw
	var plan Plan
	sorted := false
	if sorter != nil {
		docs, plan, sorted, err = s.matchSorted(rd, ns, f, spec.Sort, want)
	}
	if !sorted && err == nil {
		if sorter != nil {
			docs, plan, err = s.match(rd, ns, f, 0)
		} else {
			docs, plan, err = s.match(rd, ns, f, want)
		}
	}
	if err != nil {
		return nil, plan, err
	}
	if sorter != nil && !sorted {
		if want > 0 && want <= topKMax && want < int64(len(docs)) {
			docs = topK(docs, int(want), sorter.Compare)
		} else {
			sorter.SortDocs(docs)
		}
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
	return s.count(nil, ns, FindSpec{Filter: filter, Skip: skip, Limit: limit})
}

// CountWith is Count of spec's Filter, Skip, Limit and Collation.
func (s *Store) CountWith(ns Namespace, spec FindSpec) (int64, error) {
	return s.count(nil, ns, spec)
}

func (s *Store) count(rd *Txn, ns Namespace, spec FindSpec) (int64, error) {
	filter, skip, limit := spec.Filter, spec.Skip, spec.Limit
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return 0, err
	}
	if docs, ok, err := s.viewDocs(rd, ns); ok || err != nil {
		if err == nil {
			docs, err = findIn(docs, FindSpec{Filter: filter, Skip: skip, Limit: limit}, coll)
		}
		return int64(len(docs)), err
	}
	if text, rest, ok := splitText(filter); ok {
		docs, err := s.findText(rd, ns, FindSpec{Skip: skip, Limit: limit}, text, rest, coll)
		return int64(len(docs)), err
	}
	f, err := compileQuery(filter, coll)
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
		if o := s.overlayLocked(rd, ns); o != nil { // a transaction is open on ns (txn.go)
			o.each(c, func(doc bson.Raw, _ uint64, _ bool) bool {
				if f.Match(doc) {
					n++
				}
				return want == 0 || n < want
			})
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
	return s.distinct(nil, ns, key, FindSpec{Filter: filter})
}

// DistinctWith is Distinct of spec's Filter under spec's Collation:
// values equal under it count once, as the first of them met.
func (s *Store) DistinctWith(ns Namespace, key string, spec FindSpec) ([]bson.RawValue, error) {
	return s.distinct(nil, ns, key, spec)
}

func (s *Store) distinct(rd *Txn, ns Namespace, key string, spec FindSpec) ([]bson.RawValue, error) {
	filter := spec.Filter
	coll, err := s.collationFor(ns, spec.Collation)
	if err != nil {
		return nil, err
	}
	f, err := compileQuery(filter, coll)
	if err != nil {
		return nil, err
	}
	docs, isView, err := s.viewDocs(rd, ns)
	if isView && err == nil {
		docs, err = findIn(docs, FindSpec{Filter: filter}, coll)
	} else if err == nil {
		docs, _, err = s.match(rd, ns, f, 0)
	}
	if err != nil {
		return nil, err
	}
	return distinctOf(docs, key, coll), nil
}

// distinctOf returns the distinct values of key among docs, equal under
// coll (nil: simple) counting once.
func distinctOf(docs []bson.Raw, key string, coll *mql.Collation) []bson.RawValue {
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
	if coll != nil {
		keys := make([]bson.RawValue, len(vals))
		idx := make([]int, len(vals))
		for i, v := range vals {
			keys[i], idx[i] = coll.Transform(v), i
		}
		sort.SliceStable(idx, func(i, j int) bool { return mql.Compare(keys[idx[i]], keys[idx[j]]) < 0 })
		idx = slices.CompactFunc(idx, func(a, b int) bool { return mql.Compare(keys[a], keys[b]) == 0 })
		out := make([]bson.RawValue, len(idx))
		for i, j := range idx {
			out[i] = vals[j]
		}
		return out
	}
	sort.SliceStable(vals, func(i, j int) bool { return mql.Compare(vals[i], vals[j]) < 0 })
	return slices.CompactFunc(vals, func(a, b bson.RawValue) bool { return mql.Compare(a, b) == 0 })
}

// hasNull reports whether the document holds an explicit null at path (a
// missing field contributes nothing to distinct, an explicit null does).
func hasNull(doc bson.Raw, path []string) bool {
	v, err := doc.LookupErr(path...)
	return err == nil && v.Type == bson.TypeNull
}

// Aggregate runs a pipeline over the collection's documents, within lim.
// A leading $match selects its input through an index when it can;
// $lookup reads other collections of ns.DB.
func (s *Store) Aggregate(ns Namespace, stages []bson.Raw, lim mql.Limits) ([]bson.Raw, error) {
	return s.aggregate(nil, ns, stages, lim, bson.RawValue{})
}

// AggregateWith is Aggregate under the given collation (absent, Type 0:
// the collection's default).
func (s *Store) AggregateWith(ns Namespace, stages []bson.Raw, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error) {
	return s.aggregate(nil, ns, stages, lim, collation)
}

func (s *Store) aggregate(rd *Txn, ns Namespace, stages []bson.Raw, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error) {
	coll, err := s.collationFor(ns, collation)
	if err != nil {
		return nil, err
	}
	if len(stages) > 0 {
		if m, err := stages[0].LookupErr("$match"); err == nil && m.Type == bson.TypeEmbeddedDocument {
			if text, rest, ok := splitText(m.Document()); ok { // text.go
				return s.aggregateText(rd, ns, text, rest, stages[1:], lim, coll)
			}
		}
	}
	p, err := mql.CompilePipelineCollated(stages, coll)
	if err != nil {
		return nil, err
	}
	if docs, ok, err := s.viewDocs(rd, ns); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return p.RunLimited(env{s: s, db: ns.DB, rd: rd}, docs, lim)
	}
	var f *query
	if len(stages) > 0 {
		if m, err := stages[0].LookupErr("$match"); err == nil && m.Type == bson.TypeEmbeddedDocument {
			f, _ = compileQuery(m.Document(), coll) // the pipeline applies the $match again
		}
	}
	if f == nil {
		if f, err = compileQuery(nil, nil); err != nil {
			return nil, err
		}
	}
	input, _, err := s.match(rd, ns, f, 0)
	if err != nil {
		return nil, err
	}
	return p.RunLimited(env{s: s, db: ns.DB, rd: rd}, input, lim)
}

// env gives a pipeline the other collections of a database.
type env struct {
	s  *Store
	db string
	rd *Txn // the transaction reading, or nil
}

func (e env) Collection(name string) ([]bson.Raw, error) {
	if docs, ok, err := e.s.viewDocs(e.rd, Namespace{DB: e.db, Coll: name}); ok || err != nil {
		return docs, err
	}
	var docs []bson.Raw
	err := e.s.read(func() error {
		ns := Namespace{DB: e.db, Coll: name}
		if c := e.s.collLocked(ns); c != nil {
			docs = e.s.docsAsLocked(e.rd, ns, c)
		}
		return nil
	})
	return docs, err
}

// topKMax is the largest limit for which keeping the top documents in a
// heap while scanning beats sorting them all with SortDocs (measured on
// 100k documents: the heap is about 3× faster at 1000, slower at 10000).
const topKMax = 2000

// ranked is a document and its position in natural order, which breaks
// ties so that sorting stays stable.
type ranked struct {
	doc bson.Raw
	pos int
}

// topHeap is a max-heap of the k best documents seen so far.
type topHeap struct {
	items []ranked
	cmp   func(a, b bson.Raw) int
}

func (h *topHeap) less(a, b ranked) bool {
	if c := h.cmp(a.doc, b.doc); c != 0 {
		return c < 0
	}
	return a.pos < b.pos
}

func (h *topHeap) Len() int           { return len(h.items) }
func (h *topHeap) Less(i, j int) bool { return h.less(h.items[j], h.items[i]) } // max-heap
func (h *topHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *topHeap) Push(x any)         { h.items = append(h.items, x.(ranked)) }
func (h *topHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// topK returns the first k documents in sort order, as a stable sort of all
// of them would, in O(n log k).
func topK(docs []bson.Raw, k int, cmp func(a, b bson.Raw) int) []bson.Raw {
	h := &topHeap{items: make([]ranked, 0, k), cmp: cmp}
	for i, d := range docs {
		r := ranked{doc: d, pos: i}
		if len(h.items) < k {
			heap.Push(h, r)
			continue
		}
		if h.less(r, h.items[0]) {
			h.items[0] = r
			heap.Fix(h, 0)
		}
	}
	sort.Slice(h.items, func(i, j int) bool { return h.less(h.items[i], h.items[j]) })
	out := make([]bson.Raw, len(h.items))
	for i, r := range h.items {
		out[i] = r.doc
	}
	return out
}
