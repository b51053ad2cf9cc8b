package mql

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Sort is a compiled sort specification such as {a: 1, "b.c": -1}. It is
// safe for concurrent use.
type Sort struct {
	keys []sortKey
	coll *Collation // nil: strings sort binary
}

type sortKey struct {
	path []string
	dir  int        // 1 ascending, -1 descending
	coll *Collation // the Sort's
}

// CompileSortCollated compiles a sort whose strings order by collation c
// (nil: binary, as CompileSort).
func CompileSortCollated(s bson.Raw, c *Collation) (*Sort, error) {
	out, err := CompileSort(s)
	if err != nil || c == nil {
		return out, err
	}
	out.coll = c
	for i := range out.keys {
		out.keys[i].coll = c
	}
	return out, nil
}

// Collation is the collation the sort was compiled with (nil: simple).
func (s *Sort) Collation() *Collation {
	if s == nil {
		return nil
	}
	return s.coll
}

// CompileSort compiles a sort specification. Each value must be 1 or -1
// (15975 otherwise, as MongoDB); an empty specification sorts nothing.
func CompileSort(s bson.Raw) (*Sort, error) {
	out := &Sort{}
	it := iterDoc(s)
	for {
		k, v, ok := it.next()
		if !ok {
			return out, nil
		}
		key := string(k)
		if key == "$natural" {
			// Natural order is the order of the input: nothing to compare.
			continue
		}
		if key == "" || strings.HasPrefix(key, "$") || strings.Contains(key, "..") || strings.HasSuffix(key, ".") || strings.HasPrefix(key, ".") {
			return nil, mongoerr.New(mongoerr.BadValue, "FieldPath field names may not be empty strings or start with '$': %s", key)
		}
		if v.Type == bson.TypeEmbeddedDocument && lookup(v.Value, "$meta").Type != 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "$meta sort by %s is not supported by this server", shortString(lookup(v.Value, "$meta")))
		}
		if !isNumeric(v.Type) {
			return nil, mongoerr.New(15974, "Illegal key in $sort specification: %s: %s", key, shortString(v))
		}
		var dir int
		switch asFloat(v) {
		case 1:
			dir = 1
		case -1:
			dir = -1
		default:
			return nil, mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		out.keys = append(out.keys, sortKey{path: strings.Split(key, "."), dir: dir})
	}
}

// Compare orders documents by the sort: for an array field, an ascending
// sort uses its smallest element and a descending sort its largest; a
// missing field sorts as null. Documents that tie compare 0 (sort with a
// stable algorithm to keep their order).
func (s *Sort) Compare(a, b bson.Raw) int {
	for _, k := range s.keys {
		c := Compare(k.value(a), k.value(b))
		if c != 0 {
			return c * k.dir
		}
	}
	return 0
}

// value is the sort key of doc for k: under a collation, its strings are
// collation keys.
func (k sortKey) value(doc bson.Raw) bson.RawValue {
	if len(k.path) == 1 {
		switch v := lookup(doc, k.path[0]); v.Type {
		case 0:
			return nullValue
		case bson.TypeArray:
		default:
			if k.coll != nil {
				return k.coll.Transform(v)
			}
			return v
		}
	}
	var best bson.RawValue
	found := false
	visit := func(v bson.RawValue) {
		if k.coll != nil {
			v = k.coll.Transform(v)
		}
		if !found {
			best, found = v, true
			return
		}
		c := Compare(v, best)
		if (k.dir > 0 && c < 0) || (k.dir < 0 && c > 0) {
			best = v
		}
	}
	sortValues(vDoc(doc), k.path, visit)
	if !found {
		return nullValue
	}
	return best
}

// sortValues calls visit with every value path reaches under v: array
// elements at the end of the path (an empty array counts as undefined,
// sorting before null), and null where the path runs out.
func sortValues(v bson.RawValue, path []string, visit func(bson.RawValue)) {
	if len(path) == 0 {
		if v.Type != bson.TypeArray {
			if v.Type == 0 {
				v = nullValue
			}
			visit(v)
			return
		}
		n := 0
		it := iterDoc(v.Value)
		for {
			_, e, ok := it.next()
			if !ok {
				break
			}
			visit(e)
			n++
		}
		if n == 0 {
			visit(bson.RawValue{Type: bson.TypeUndefined})
		}
		return
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		sortValues(lookup(v.Value, path[0]), path[1:], visit)
	case bson.TypeArray:
		if i, ok := arrayIndex(path[0]); ok {
			elems := arrayValues(v.Value)
			if i < len(elems) {
				sortValues(elems[i], path[1:], visit)
				return
			}
		}
		n := 0
		it := iterDoc(v.Value)
		for {
			_, e, ok := it.next()
			if !ok {
				break
			}
			if e.Type == bson.TypeEmbeddedDocument {
				sortValues(lookup(e.Value, path[0]), path[1:], visit)
				n++
			}
		}
		if n == 0 {
			visit(nullValue)
		}
	default:
		visit(nullValue)
	}
}

// SortDocs sorts docs in place, stably, computing each document's sort keys
// once (cheaper than sorting with Compare, which extracts them per call).
func (s *Sort) SortDocs(docs []bson.Raw) {
	if len(s.keys) == 0 || len(docs) < 2 {
		return
	}
	n := len(s.keys)
	keys := make([]bson.RawValue, len(docs)*n)
	size := 0
	for i, d := range docs {
		for j, k := range s.keys {
			v := k.value(d)
			keys[i*n+j] = v
			size += len(v.Value)
		}
	}
	// Copy the keys next to each other: comparing them then stays in cache
	// instead of touching every document again.
	arena := make([]byte, 0, size)
	for i := range keys {
		start := len(arena)
		arena = append(arena, keys[i].Value...)
		keys[i].Value = arena[start:len(arena):len(arena)]
	}
	// Sort positions, breaking ties by position: stable, and pdqsort is
	// much faster than a stable merge sort.
	idx := make([]int32, len(docs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		ka, kb := keys[int(a)*n:int(a)*n+n], keys[int(b)*n:int(b)*n+n]
		for j, k := range s.keys {
			if c := Compare(ka[j], kb[j]); c != 0 {
				return c * k.dir
			}
		}
		return cmpInt(a, b)
	})
	sorted := make([]bson.Raw, len(docs))
	for i, j := range idx {
		sorted[i] = docs[j]
	}
	copy(docs, sorted)
}
