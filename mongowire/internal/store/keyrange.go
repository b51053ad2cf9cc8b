package store

import (
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// ErrNoKeyIndex is returned by WalkKeyRange when no index can give the
// documents in the order of the key pattern.
var ErrNoKeyIndex = errors.New("store: no index over the key pattern")

// KeyRange is a range of a collection in the order of an index: the
// entries whose key (the Pattern's fields, each ascending) is at least
// Min and below Max. Min and Max are documents with the Pattern's fields;
// a missing bound (nil) leaves that end open.
type KeyRange struct {
	Pattern  bson.D
	Min, Max bson.Raw
}

// CollTotals are a collection's document count and data size (the sum of
// its documents' BSON sizes): mongod's splitVector and dataSize estimate
// from them.
type CollTotals struct {
	Count, Size int64
}

// WalkKeyRange calls fn, in index order, with the key values (one per
// Pattern field) and the document of each entry of r, until fn returns
// false; fn runs under the store's read lock and must not call the store.
// The index is one whose key starts with the Pattern's fields, ascending,
// with one entry per document (not multikey, sparse, partial or hidden)
// and the simple collation; without one, the error is ErrNoKeyIndex. It
// returns the collection's totals. A missing collection is
// NamespaceNotFound.
func (s *Store) WalkKeyRange(ns Namespace, r KeyRange, fn func(key []bson.RawValue, doc bson.Raw) bool) (CollTotals, error) {
	n := len(r.Pattern)
	if n == 0 {
		return CollTotals{}, ErrNoKeyIndex
	}
	for _, e := range r.Pattern {
		if dir, err := keyDirection(e.Value); err != nil || dir != 1 {
			return CollTotals{}, ErrNoKeyIndex
		}
	}
	bound := func(doc bson.Raw, edge bson.Type) []bson.RawValue {
		if doc == nil {
			return nil
		}
		out := make([]bson.RawValue, n)
		for i, e := range r.Pattern {
			v, err := doc.LookupErr(e.Key)
			if err != nil {
				v = bson.RawValue{Type: edge}
			}
			out[i] = v
		}
		return out
	}
	lo, hi := bound(r.Min, bson.TypeMinKey), bound(r.Max, bson.TypeMaxKey)
	var totals CollTotals
	err := s.read(func() error {
		c := s.collLocked(ns)
		if c == nil || c.view != nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found: %s", ns)
		}
		totals = CollTotals{Count: int64(c.live), Size: c.size}
		ix := c.keyIndex(r.Pattern)
		if ix == nil {
			return ErrNoKeyIndex
		}
		keyOf := func(e *entry) []bson.RawValue {
			key := make([]bson.RawValue, n)
			for i := range key {
				key[i], _ = entryKey(e, i)
			}
			return key
		}
		cmpKey := func(key, b []bson.RawValue) int {
			for i := range key {
				if c := compareValues(key[i], b[i]); c != 0 {
					return c
				}
			}
			return 0
		}
		var from *entry
		if lo != nil {
			from = &entry{k0: lo[0]}
			if n > 1 {
				rest := lo[1:]
				from.rest = &rest
			}
		}
		ix.tree.ascend(from, func(e *entry) bool {
			key := keyOf(e)
			if lo != nil && cmpKey(key, lo) < 0 {
				return true
			}
			if hi != nil && cmpKey(key, hi) >= 0 {
				return false
			}
			p := c.pos(e.rid)
			if p < 0 {
				return true
			}
			return fn(key, c.recs[p].doc)
		})
		return nil
	})
	return totals, err
}

// keyIndex returns the index that WalkKeyRange walks for pattern, the
// one with the fewest fields, or nil.
func (c *collection) keyIndex(pattern bson.D) *index {
	var best *index
	for _, ix := range c.indexes {
		if len(ix.spec.Key) < len(pattern) || ix.multikey || ix.spec.Sparse || ix.partial != nil || ix.hidden() || ix.coll != nil || ix.text != nil || ix.hashed {
			continue
		}
		fits := true
		for i, e := range pattern {
			fits = fits && ix.spec.Key[i].Key == e.Key && ix.dirs[i] == 1
		}
		if fits && (best == nil || len(ix.spec.Key) < len(best.spec.Key)) {
			best = ix
		}
	}
	return best
}
