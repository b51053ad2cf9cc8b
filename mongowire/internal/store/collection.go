package store

import (
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// record is a stored document and its record id. Record ids grow with
// every insert, so records sorted by id are in natural (insertion) order.
type record struct {
	rid uint64
	doc bson.Raw // nil once deleted
}

// collection holds the documents and indexes of one collection.
type collection struct {
	info      CollectionInfo
	recs      []record // sorted by rid, with holes (doc == nil) for deletions
	live      int
	nextRID   uint64
	size      int64      // bytes of live documents
	indexes   []*index   // indexes[0] is _id_
	validator *validator // nil: none (validator.go)
	// capped collections (capped.go)
	capped          bool
	capSize, capMax int64
	capHead         int
	view            *viewDef // a view (view.go): no documents of its own
	// coll is the default collation (nil: simple), of queries that give
	// none and of indexes created without one.
	coll *mql.Collation
	ts   *tsSpec // a time-series collection (timeseries.go)
}

var idIndexSpec = IndexSpec{Name: "_id_", Key: bson.D{{Key: "_id", Value: int32(1)}}}

func newCollection(info CollectionInfo) *collection {
	ix, err := newIndex(idIndexSpec)
	if err != nil {
		panic(err) // the _id index spec is a constant
	}
	return &collection{info: info, nextRID: 1, indexes: []*index{ix}}
}

// pos returns the position of rid in recs, or -1.
func (c *collection) pos(rid uint64) int {
	i := sort.Search(len(c.recs), func(j int) bool { return c.recs[j].rid >= rid })
	if i < len(c.recs) && c.recs[i].rid == rid && c.recs[i].doc != nil {
		return i
	}
	return -1
}

func (c *collection) index(name string) *index {
	for _, ix := range c.indexes {
		if ix.spec.Name == name {
			return ix
		}
	}
	return nil
}

// keysOf computes the entries of doc for every index.
func (c *collection) keysOf(doc bson.Raw, rid uint64) ([][]entry, error) {
	all := make([][]entry, len(c.indexes))
	for i, ix := range c.indexes {
		es, err := ix.keys(doc, rid)
		if err != nil {
			return nil, err
		}
		all[i] = es
	}
	return all, nil
}

// checkUnique reports the first unique index violated by keys.
func (c *collection) checkUnique(ns Namespace, keys [][]entry, self uint64) *mongoerr.Error {
	for i, ix := range c.indexes {
		if !ix.unique() && !ix.prepared() && i != 0 || i == 0 && c.ts != nil {
			continue // a time-series _id is not unique
		}
		for j := range keys[i] {
			if ix.conflict(&keys[i][j], self) != 0 {
				return ix.dupKeyError(ns, &keys[i][j])
			}
		}
	}
	return nil
}

// insert stores doc (which already has its _id) as a new record.
func (c *collection) insert(ns Namespace, doc bson.Raw) *mongoerr.Error {
	rid := c.nextRID
	keys, err := c.keysOf(doc, rid)
	if err != nil {
		return asMongo(err)
	}
	if err := c.checkUnique(ns, keys, rid); err != nil {
		return err
	}
	c.nextRID++
	c.recs = append(c.recs, record{rid: rid, doc: doc})
	c.live++
	c.size += int64(len(doc))
	for i, ix := range c.indexes {
		for _, e := range keys[i] {
			ix.tree.insert(e)
		}
	}
	return nil
}

// replace stores doc in place of the record at position p. Index keys
// that did not change are only repointed at the new document (so that the
// old one can be freed); the others are deleted and inserted again.
func (c *collection) replace(ns Namespace, p int, doc bson.Raw) *mongoerr.Error {
	r := &c.recs[p]
	newKeys, err := c.keysOf(doc, r.rid)
	if err != nil {
		return asMongo(err)
	}
	oldKeys, _ := c.keysOf(r.doc, r.rid)
	same := make([]bool, len(c.indexes))
	changed := make([][]entry, len(c.indexes))
	for i := range c.indexes {
		same[i] = sameEntries(oldKeys[i], newKeys[i])
		if !same[i] {
			changed[i] = newKeys[i]
		}
	}
	if err := c.checkUnique(ns, changed, r.rid); err != nil {
		return err
	}
	for i, ix := range c.indexes {
		if same[i] {
			for j := range oldKeys[i] {
				if e := ix.tree.find(&oldKeys[i][j]); e != nil {
					e.k0, e.rest = newKeys[i][j].k0, newKeys[i][j].rest
				}
			}
			continue
		}
		for j := range oldKeys[i] {
			ix.tree.delete(&oldKeys[i][j])
		}
		for _, e := range newKeys[i] {
			ix.tree.insert(e)
		}
	}
	c.size += int64(len(doc) - len(r.doc))
	r.doc = doc
	return nil
}

// sameEntries reports whether two key lists hold the same values, byte for
// byte and in the same order.
func sameEntries(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i].k0, b[i].k0) || (a[i].rest == nil) != (b[i].rest == nil) {
			return false
		}
		if a[i].rest != nil {
			ar, br := *a[i].rest, *b[i].rest
			for j := range ar {
				if !sameValue(ar[j], br[j]) {
					return false
				}
			}
		}
	}
	return true
}

// remove deletes the record at position p.
func (c *collection) remove(p int) {
	r := &c.recs[p]
	keys, _ := c.keysOf(r.doc, r.rid)
	for i, ix := range c.indexes {
		for j := range keys[i] {
			ix.tree.delete(&keys[i][j])
		}
	}
	c.size -= int64(len(r.doc))
	c.live--
	r.doc = nil
	if dead := len(c.recs) - c.live; dead > 1024 && dead > c.live {
		kept := c.recs[:0]
		for _, r := range c.recs {
			if r.doc != nil {
				kept = append(kept, r)
			}
		}
		clear(c.recs[len(kept):])
		c.recs = kept
	}
}

// byID returns the position of the document whose _id equals id, or -1.
func (c *collection) byID(id bson.RawValue) int {
	ix := c.indexes[0]
	probe := entry{k0: ix.coll.Transform(id)}
	p := -1
	ix.tree.ascend(&probe, func(e *entry) bool {
		if ix.compareKeys(e, &probe) == 0 {
			p = c.pos(e.rid)
		}
		return false
	})
	return p
}

// addIndex builds an index over the existing documents: their keys are
// collected, sorted and loaded at once, which is much faster than inserting
// them one by one into a large tree.
func (c *collection) addIndex(ns Namespace, ix *index) *mongoerr.Error {
	if err := c.build(ns, ix); err != nil {
		return err
	}
	c.indexes = append(c.indexes, ix)
	return nil
}

func (c *collection) build(ns Namespace, ix *index) *mongoerr.Error {
	all := make([]entry, 0, c.live)
	for _, r := range c.recs {
		if r.doc == nil {
			continue
		}
		es, err := ix.keys(r.doc, r.rid)
		if err != nil {
			return asMongo(err)
		}
		all = append(all, es...)
	}
	slices.SortFunc(all, func(a, b entry) int { return ix.compare(&a, &b) })
	if ix.unique() || ix == c.indexes[0] {
		for i := 1; i < len(all); i++ {
			if all[i-1].rid != all[i].rid && ix.compareKeys(&all[i-1], &all[i]) == 0 {
				return ix.dupKeyError(ns, &all[i])
			}
		}
	}
	ix.tree = newTree(ix.compare)
	ix.tree.load(all)
	return nil
}

// appendLoaded adds a document read from a snapshot without touching the
// indexes; rebuildIndexes then builds them all.
func (c *collection) appendLoaded(doc bson.Raw) {
	c.recs = append(c.recs, record{rid: c.nextRID, doc: doc})
	c.nextRID++
	c.live++
	c.size += int64(len(doc))
}

func (c *collection) rebuildIndexes(ns Namespace) *mongoerr.Error {
	for _, ix := range c.indexes {
		if err := c.build(ns, ix); err != nil {
			return err
		}
	}
	return nil
}

// docs returns the live documents in natural order.
func (c *collection) docs() []bson.Raw {
	out := make([]bson.Raw, 0, c.live)
	for _, r := range c.recs {
		if r.doc != nil {
			out = append(out, r.doc)
		}
	}
	return out
}

// specs returns the index specs.
func (c *collection) specs() []IndexSpec {
	out := make([]IndexSpec, len(c.indexes))
	for i, ix := range c.indexes {
		out[i] = ix.spec
	}
	return out
}
