package store

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// An update's UpdateDescription is built the way MongoDB 7.0 builds it: the
// write produces a diff tree (the shape of a $v:2 delta oplog entry), and the
// tree is read into updatedFields, removedFields and truncatedArrays. A
// modifier-style update logs the paths its operators wrote (updatelog.go); a
// pipeline-style update diffs the documents before and after (docDiff).

// dkind is what a diff entry does at its key.
type dkind uint8

const (
	dUpdate dkind = iota // the field (or element) now holds value
	dInsert              // the field was created holding value
	dDelete              // the field was removed
	dSub                 // changes inside the field, in sub
)

// dentry is one entry of a diff node: a field name in a document node, an
// index in an array node.
type dentry struct {
	key   string
	idx   int
	kind  dkind
	value bson.RawValue
	sub   *dnode
}

// dnode is a document or array node of a diff tree. size tracks the
// approximate BSON size of the node serialized as a $v:2 diff, as MongoDB
// tracks it to decide whether a diff is worth more than the value.
type dnode struct {
	array   bool
	entries []*dentry // in the order added
	resize  int       // array nodes: the new length of a shrunk array, or -1
	size    int
	kinds   [3]bool // document nodes: which of the u, i and d sections exist
}

// Sizes of MongoDB's diff size accounting.
const (
	emptyDocDiffSize   = 5
	emptyArrayDiffSize = 9
	// deltaPadding is the size of the {$v: 2, diff: ...} wrapper around a
	// top-level diff.
	deltaPadding = 15
)

func newDocNode(padding int) *dnode { return &dnode{size: emptyDocDiffSize + padding, resize: -1} }
func newArrayNode() *dnode          { return &dnode{array: true, size: emptyArrayDiffSize, resize: -1} }

func newNode(array bool) *dnode {
	if array {
		return newArrayNode()
	}
	return newDocNode(0)
}

func (n *dnode) find(c pathComp) *dentry {
	for _, e := range n.entries {
		if n.array && e.idx == c.index || !n.array && e.key == c.field {
			return e
		}
	}
	return nil
}

// add appends an entry and accounts for its size.
func (n *dnode) add(e *dentry) {
	name := len(e.key)
	if n.array {
		name = 1 + len(strconv.Itoa(e.idx))
	}
	n.size += name + 2
	switch e.kind {
	case dSub:
		n.size += e.sub.size
		if !n.array {
			n.size++ // the "s" prefix of a sub-diff's field name
		}
	case dUpdate, dInsert:
		n.size += len(e.value.Value)
	case dDelete:
		n.size++
	}
	if !n.array && e.kind != dSub && !n.kinds[e.kind] {
		n.kinds[e.kind] = true
		n.size += 8 // the section's wrapping document
	}
	n.entries = append(n.entries, e)
}

func (n *dnode) setResize(size int) {
	n.resize = size
	n.size += 7
}

// describe reads a diff tree as a change stream does.
func (n *dnode) describe() *UpdateDescription {
	d := &describer{ud: &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}}
	d.node(nil, n)
	return d.ud
}

type describer struct {
	ud *UpdateDescription
}

func (d *describer) node(p []pathComp, n *dnode) {
	if n.array {
		if n.resize >= 0 {
			d.ud.TruncatedArrays = append(d.ud.TruncatedArrays, TruncatedArray{Field: d.path(p), NewSize: int32(n.resize)})
		}
		es := slices.Clone(n.entries)
		slices.SortStableFunc(es, func(a, b *dentry) int { return a.idx - b.idx })
		for _, e := range es {
			ep := with(p, pathComp{index: e.idx, isIdx: true})
			if e.kind == dSub {
				d.node(ep, e.sub)
				continue
			}
			d.set(ep, e.value)
		}
		return
	}
	// Updates, then inserts, then deletes, then sub-diffs, as MongoDB reads
	// a document diff.
	for _, kind := range []dkind{dUpdate, dInsert, dDelete, dSub} {
		for _, e := range n.entries {
			if e.kind != kind {
				continue
			}
			ep := with(p, pathComp{field: e.key})
			switch kind {
			case dUpdate, dInsert:
				d.set(ep, e.value)
			case dDelete:
				d.ud.RemovedFields = append(d.ud.RemovedFields, d.path(ep))
			case dSub:
				d.node(ep, e.sub)
			}
		}
	}
}

func (d *describer) set(p []pathComp, v bson.RawValue) {
	d.ud.UpdatedFields = append(d.ud.UpdatedFields, bson.E{Key: d.path(p), Value: v})
}

// pathComp is one component of a path: a field name, or an array index.
type pathComp struct {
	field string
	index int
	isIdx bool
}

func (c pathComp) String() string {
	if c.isIdx {
		return strconv.Itoa(c.index)
	}
	return c.field
}

// path renders p dotted, and records it in DisambiguatedPaths when a field
// name in it could be read as something else: a numeric field name past the
// first component (it reads as an array index), or a name with a dot. The
// components are listed with array indexes as int32.
func (d *describer) path(p []pathComp) string {
	parts := make([]string, len(p))
	ambiguous := false
	for i, c := range p {
		parts[i] = c.String()
		if !c.isIdx && (i > 0 && isStrictNumeric(c.field) || strings.Contains(c.field, ".")) {
			ambiguous = true
		}
	}
	s := strings.Join(parts, ".")
	if ambiguous {
		comps := make(bson.A, len(p))
		for i, c := range p {
			if c.isIdx {
				comps[i] = int32(c.index)
			} else {
				comps[i] = c.field
			}
		}
		d.ud.DisambiguatedPaths = append(d.ud.DisambiguatedPaths, bson.E{Key: s, Value: comps})
	}
	return s
}

// isStrictNumeric reports whether s is a decimal number without leading
// zeros, as an array index would be written.
func isStrictNumeric(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	return isNumeric(s)
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func sameValue(a, b bson.RawValue) bool {
	return a.Type == b.Type && bytes.Equal(a.Value, b.Value)
}

func with(p []pathComp, c pathComp) []pathComp {
	return append(p[:len(p):len(p)], c)
}

// diffDocs describes how after differs from before as MongoDB's document
// diff does, however large the diff.
func diffDocs(before, after bson.Raw) *UpdateDescription {
	return docDiff(before, after, 0, true).describe()
}

// pipelineDiff describes a pipeline-style update: nil when the diff is not
// smaller than the new document, which MongoDB then logs (and change streams
// report) as a replacement.
func pipelineDiff(before, after bson.Raw) *UpdateDescription {
	n := docDiff(before, after, deltaPadding, false)
	if n == nil {
		return nil
	}
	return n.describe()
}

// docDiff computes the diff of two documents as MongoDB's document diff
// calculator does: fields are walked in step; an equal field is skipped; a
// changed field holding a document or array on both sides is diffed inside,
// unless that diff is not smaller than the new value; a field out of step is
// deleted, and fields left in after are inserted (which moves them last).
// Without unlimited it returns nil when the diff is not smaller than after.
func docDiff(before, after bson.Raw, padding int, unlimited bool) *dnode {
	n := newDocNode(padding)
	pe, _ := before.Elements()
	ae, _ := after.Elements()
	var deletes []string
	i, j := 0, 0
	for i < len(pe) && j < len(ae) {
		p, a := pe[i], ae[j]
		if bytes.Equal(p, a) {
			i, j = i+1, j+1
			continue
		}
		if p.Key() != a.Key() {
			deletes = append(deletes, p.Key())
			i++
			continue
		}
		subDiff(n, pathComp{field: a.Key()}, p.Value(), a.Value(), unlimited)
		i, j = i+1, j+1
	}
	for ; i < len(pe); i++ {
		n.add(&dentry{key: pe[i].Key(), kind: dDelete})
	}
	for ; j < len(ae); j++ {
		k := ae[j].Key()
		n.add(&dentry{key: k, kind: dInsert, value: ae[j].Value()})
		deletes = slices.DeleteFunc(deletes, func(d string) bool { return d == k })
	}
	slices.Sort(deletes)
	for _, k := range deletes {
		n.add(&dentry{key: k, kind: dDelete})
	}
	if !unlimited && len(after) <= n.size {
		return nil
	}
	return n
}

// arrayDiff computes the diff of two arrays element by element: changed
// elements are updated (or diffed inside), added ones updated, and a shorter
// array resized.
func arrayDiff(before, after bson.RawArray, unlimited bool) *dnode {
	n := newArrayNode()
	pv, _ := before.Values()
	av, _ := after.Values()
	k := 0
	for ; k < len(pv) && k < len(av); k++ {
		if !sameValue(pv[k], av[k]) {
			subDiff(n, pathComp{index: k, isIdx: true}, pv[k], av[k], unlimited)
		}
	}
	for ; k < len(av); k++ {
		n.add(&dentry{idx: k, kind: dUpdate, value: av[k]})
	}
	if len(pv) > len(av) {
		n.setResize(len(av))
	}
	if !unlimited && len(after) <= n.size {
		return nil
	}
	return n
}

// subDiff records a changed value in n: a diff inside it when both sides
// are documents or both arrays and that diff is smaller, else the new value.
func subDiff(n *dnode, c pathComp, bv, av bson.RawValue, unlimited bool) {
	var sub *dnode
	switch {
	case bv.Type != av.Type:
	case bv.Type == bson.TypeEmbeddedDocument:
		sub = docDiff(bv.Document(), av.Document(), 0, unlimited)
	case bv.Type == bson.TypeArray:
		sub = arrayDiff(bv.Array(), av.Array(), unlimited)
	}
	e := &dentry{key: c.field, idx: c.index, kind: dUpdate, value: av}
	if sub != nil {
		e.kind, e.sub = dSub, sub
	}
	n.add(e)
}
