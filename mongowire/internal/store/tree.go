package store

import (
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// An entry is one key of an index: the key's values, one per indexed
// field, and the record it points to. The first value is kept inline so that
// a single-field index (the common case, and every _id index) costs no
// allocation per entry, and 48 bytes. Key values are sub-slices of the stored document,
// which is never modified once stored.
type entry struct {
	k0   bson.RawValue
	rest *[]bson.RawValue // the other values of a compound key
	rid  uint64
}

const (
	chunkMax = 512 // a chunk splits when it grows past this many entries
	ridMax   = ^uint64(0)
)

// tree is an ordered set of entries: a sorted list of sorted chunks, a
// two-level B-tree that is simple and cache friendly. Lookups are two binary
// searches; an insert shifts at most chunkMax entries.
type tree struct {
	chunks [][]entry
	n      int
	cmp    func(a, b *entry) int // key order, then rid
}

func newTree(cmp func(a, b *entry) int) *tree { return &tree{cmp: cmp} }

func (t *tree) len() int { return t.n }

// seek returns the position of the first entry ≥ e.
func (t *tree) seek(e *entry) (ci, i int) {
	ci = sort.Search(len(t.chunks), func(j int) bool {
		c := t.chunks[j]
		return t.cmp(&c[len(c)-1], e) >= 0
	})
	if ci == len(t.chunks) {
		return ci, 0
	}
	c := t.chunks[ci]
	i = sort.Search(len(c), func(j int) bool { return t.cmp(&c[j], e) >= 0 })
	return ci, i
}

func (t *tree) insert(e entry) {
	t.n++
	if len(t.chunks) == 0 {
		c := make([]entry, 1, 8)
		c[0] = e
		t.chunks = append(t.chunks, c)
		return
	}
	ci, i := t.seek(&e)
	if ci == len(t.chunks) { // after the last entry
		ci = len(t.chunks) - 1
		i = len(t.chunks[ci])
	}
	c := append(t.chunks[ci], entry{})
	copy(c[i+1:], c[i:])
	c[i] = e
	if len(c) > chunkMax {
		// Exact capacities: with increasing keys (ObjectIds, counters) the
		// left half never grows again; append grows the right one.
		half := len(c) / 2
		left := slices.Clone(c[:half])
		right := slices.Clone(c[half:])
		t.chunks = append(t.chunks, nil)
		copy(t.chunks[ci+2:], t.chunks[ci+1:])
		t.chunks[ci] = left
		t.chunks[ci+1] = right
		return
	}
	t.chunks[ci] = c
}

// load replaces the contents with entries, which must be sorted.
func (t *tree) load(entries []entry) {
	const fill = chunkMax * 3 / 4 // room to grow before a chunk splits
	t.chunks, t.n = nil, len(entries)
	for len(entries) > 0 {
		n := min(fill, len(entries))
		c := slices.Clone(entries[:n])
		t.chunks = append(t.chunks, c)
		entries = entries[n:]
	}
}

// find returns the entry equal to e (same key and rid), or nil.
func (t *tree) find(e *entry) *entry {
	ci, i := t.seek(e)
	if ci == len(t.chunks) || t.cmp(&t.chunks[ci][i], e) != 0 {
		return nil
	}
	return &t.chunks[ci][i]
}

// delete removes the entry equal to e (same key and rid); it reports whether
// there was one.
func (t *tree) delete(e *entry) bool {
	ci, i := t.seek(e)
	if ci == len(t.chunks) || t.cmp(&t.chunks[ci][i], e) != 0 {
		return false
	}
	t.n--
	c := t.chunks[ci]
	copy(c[i:], c[i+1:])
	c[len(c)-1] = entry{}
	c = c[:len(c)-1]
	if len(c) == 0 {
		t.chunks = append(t.chunks[:ci], t.chunks[ci+1:]...)
		return true
	}
	t.chunks[ci] = c
	return true
}

// ascend calls fn for each entry ≥ from (every entry if from is nil), in
// order, until fn returns false.
func (t *tree) ascend(from *entry, fn func(e *entry) bool) {
	ci, i := 0, 0
	if from != nil {
		ci, i = t.seek(from)
	}
	for ; ci < len(t.chunks); ci++ {
		c := t.chunks[ci]
		for ; i < len(c); i++ {
			if !fn(&c[i]) {
				return
			}
		}
		i = 0
	}
}

// descend calls fn for each entry < from (every entry if from is nil), in
// reverse order, until fn returns false.
func (t *tree) descend(from *entry, fn func(e *entry) bool) {
	ci, i := len(t.chunks), 0
	if from != nil {
		ci, i = t.seek(from)
	}
	// (ci, i) is the first entry not to visit; chunks are never empty.
	for {
		if i == 0 {
			ci--
			if ci < 0 {
				return
			}
			i = len(t.chunks[ci])
		}
		i--
		if !fn(&t.chunks[ci][i]) {
			return
		}
	}
}
