package store

import (
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// compiledUpdate is an update statement compiled, with what the oplog needs
// to describe its writes as MongoDB does.
type compiledUpdate struct {
	*mql.Update
	log *updateLog // modifier-style updates; nil for replacements and pipelines
}

func compileUpdate(update bson.RawValue, arrayFilters []bson.Raw) (*compiledUpdate, error) {
	u, err := mql.CompileUpdate(update, arrayFilters)
	if err != nil {
		return nil, err
	}
	cu := &compiledUpdate{Update: u}
	if !u.IsReplacement() && update.Type == bson.TypeEmbeddedDocument {
		cu.log = newUpdateLog(update.Document(), arrayFilters)
	}
	return cu, nil
}

// describe returns the oplog's view of an update of before into after: the
// operation and, for "update", its description.
func (u *compiledUpdate) describe(before, after bson.Raw, positional int) (string, *UpdateDescription) {
	switch {
	case u.IsReplacement():
		return "replace", nil
	case u.log != nil:
		d := u.log.describe(before, after, positional)
		if len(d.UpdatedFields) == 0 && len(d.RemovedFields) == 0 && len(d.TruncatedArrays) == 0 {
			// The document changed in a way no operator path accounts
			// for; report the difference rather than nothing.
			d = diffDocs(before, after)
		}
		return "update", d
	}
	if d := pipelineDiff(before, after); d != nil {
		return "update", d
	}
	return "replace", nil
}

// updateLog describes the writes of a modifier-style update the way
// MongoDB's update driver logs them into a $v:2 delta oplog entry: each
// operator reports the path it wrote, not a diff of the documents. The
// operators are applied in a tree of their paths, fields in order (numeric
// names numerically, the positional $ first), and each target path is
// judged by comparing the documents before and after:
//
//   - a path that did not exist is created: the first missing component is
//     reported with its whole new value;
//   - $set, $inc, $mul, $min, $max, $currentDate, $bit, $addToSet, $pop,
//     $pull and $pullAll report the path with its whole new value when it
//     changed; a value written unchanged is a no-op;
//   - $push appending to a non-empty array (no $sort, no $position within
//     the array, nothing sliced off) reports each new element as "arr.N";
//     any other change reports the whole array;
//   - $unset removes the field (an array element becomes null: updated);
//   - $rename removes the source and writes the destination;
//   - $[] and $[id] apply to the matching elements of an array; when more
//     than one element matches, the children do not log themselves: the
//     one modified element is reported whole ("arr.N"), or the whole array
//     when several were modified.
type updateLog struct {
	root    *unode
	filters map[string]*mql.Filter // array filters by identifier
}

// unode is a node of the update's path tree.
type unode struct {
	fields map[string]*unode // by path component; "$" is the positional element
	arrays map[string]*unode // by array filter identifier; "" for $[]
	op     *target
}

// target is an operator applied at a path.
type target struct {
	op   string   // "$set", "$push", ...
	from []string // $rename: the source path
	push pushSpec
}

type pushSpec struct {
	each   int
	sorted bool
	hasPos bool
	pos    int64
	sliced bool
}

func newUpdateLog(update bson.Raw, arrayFilters []bson.Raw) *updateLog {
	l := &updateLog{root: &unode{}, filters: map[string]*mql.Filter{}}
	ops, _ := update.Elements()
	for _, op := range ops {
		if op.Value().Type != bson.TypeEmbeddedDocument {
			continue
		}
		fields, _ := op.Value().Document().Elements()
		for _, f := range fields {
			path := strings.Split(f.Key(), ".")
			switch op.Key() {
			case "$rename":
				to, ok := f.Value().StringValueOK()
				if !ok {
					continue
				}
				// Applied at the destination, as MongoDB's RenameNode is.
				l.insert(strings.Split(to, "."), &target{op: "$rename", from: path})
			case "$push":
				l.insert(path, &target{op: "$push", push: parsePush(f.Value())})
			default:
				l.insert(path, &target{op: op.Key()})
			}
		}
	}
	for _, af := range arrayFilters {
		id := filterIdentifier(af)
		if id == "" {
			continue
		}
		if f, err := mql.CompileFilter(af); err == nil {
			l.filters[id] = f
		}
	}
	return l
}

func parsePush(v bson.RawValue) pushSpec {
	d, ok := v.DocumentOK()
	if !ok {
		return pushSpec{each: 1}
	}
	each, err := d.LookupErr("$each")
	if err != nil {
		return pushSpec{each: 1}
	}
	p := pushSpec{}
	if vals, err := each.Array().Values(); err == nil {
		p.each = len(vals)
	}
	if _, err := d.LookupErr("$sort"); err == nil {
		p.sorted = true
	}
	if _, err := d.LookupErr("$slice"); err == nil {
		p.sliced = true
	}
	if pos, err := d.LookupErr("$position"); err == nil {
		p.hasPos = true
		if n, ok := pos.AsInt64OK(); ok {
			p.pos = n
		}
	}
	return p
}

// filterIdentifier returns the identifier an array filter constrains: the
// first component of its first field, looking into $and/$or/$nor.
func filterIdentifier(f bson.Raw) string {
	elems, _ := f.Elements()
	for _, e := range elems {
		k := e.Key()
		if !strings.HasPrefix(k, "$") {
			id, _, _ := strings.Cut(k, ".")
			return id
		}
		if arr, ok := e.Value().ArrayOK(); ok {
			vals, _ := arr.Values()
			for _, v := range vals {
				if d, ok := v.DocumentOK(); ok {
					if id := filterIdentifier(d); id != "" {
						return id
					}
				}
			}
		}
	}
	return ""
}

func (l *updateLog) insert(path []string, t *target) {
	n := l.root
	for _, c := range path {
		var m map[string]*unode
		key := c
		switch {
		case c == "$[]":
			m, key = n.arrayKids(), ""
		case strings.HasPrefix(c, "$[") && strings.HasSuffix(c, "]"):
			m, key = n.arrayKids(), c[2:len(c)-1]
		default:
			if n.fields == nil {
				n.fields = map[string]*unode{}
			}
			m = n.fields
		}
		next := m[key]
		if next == nil {
			next = &unode{}
			m[key] = next
		}
		n = next
	}
	n.op = t
}

func (n *unode) arrayKids() map[string]*unode {
	if n.arrays == nil {
		n.arrays = map[string]*unode{}
	}
	return n.arrays
}

// compareComponents orders field names as MongoDB applies them: numeric
// names numerically, others as strings, the positional $ first.
func compareComponents(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "$":
		return -1
	case b == "$":
		return 1
	case isNumeric(a) && isNumeric(b):
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(ta) != len(tb) {
			return len(ta) - len(tb)
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func (l *updateLog) describe(before, after bson.Raw, positional int) *UpdateDescription {
	r := &logRun{l: l, before: before, after: after, positional: positional, root: newDocNode(0)}
	r.node(l.root, nil, true)
	return r.root.describe()
}

// logRun logs one application of the update.
type logRun struct {
	l             *updateLog
	before, after bson.Raw
	positional    int
	root          *dnode
}

func (r *logRun) node(n *unode, path []string, log bool) {
	if n.op != nil {
		if log {
			r.leaf(n.op, path)
		}
		return
	}
	keys := make([]string, 0, len(n.fields))
	for k := range n.fields {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareComponents)
	for _, k := range keys {
		c := k
		if k == "$" {
			if r.positional < 0 {
				continue
			}
			c = strconv.Itoa(r.positional)
		}
		r.node(n.fields[k], withStr(path, c), log)
	}
	if len(n.arrays) > 0 {
		r.array(n, path, log)
	}
}

// array applies the $[] and $[id] children of n to the elements they match.
func (r *logRun) array(n *unode, path []string, log bool) {
	arr, ok := lookupPath(r.before, path)
	if !ok || arr.Type != bson.TypeArray {
		return
	}
	elems, _ := arr.Array().Values()
	ids := make([]string, 0, len(n.arrays))
	for id := range n.arrays {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	type match struct {
		i    int
		kids []*unode
	}
	var matches []match
	for i, e := range elems {
		var kids []*unode
		for _, id := range ids {
			if id == "" || r.matches(id, e) {
				kids = append(kids, n.arrays[id])
			}
		}
		if len(kids) > 0 {
			matches = append(matches, match{i, kids})
		}
	}
	childLog := log && len(matches) <= 1
	modified, last := 0, ""
	for _, m := range matches {
		p := withStr(path, strconv.Itoa(m.i))
		for _, k := range m.kids {
			r.node(k, p, childLog)
		}
		b, bok := lookupPath(r.before, p)
		a, aok := lookupPath(r.after, p)
		if bok != aok || !sameValue(a, b) {
			modified++
			last = p[len(p)-1]
		}
	}
	switch {
	case !log || childLog:
	case modified > 1:
		r.logValue(dUpdate, path)
	case modified == 1:
		r.logValue(dUpdate, withStr(path, last))
	}
}

func (r *logRun) matches(id string, elem bson.RawValue) bool {
	f := r.l.filters[id]
	if f == nil {
		return false
	}
	doc := buildDoc(bsoncore.AppendValueElement(nil, id, bsoncore.Value{Type: bsoncore.Type(elem.Type), Data: elem.Value}))
	return f.Match(doc)
}

// leaf logs what the operator t did at path.
func (r *logRun) leaf(t *target, path []string) {
	if t.op == "$setOnInsert" {
		return
	}
	bv, bok, missing := r.walkBefore(path)
	av, aok := lookupPath(r.after, path)
	created := func() {
		if aok {
			r.logValue(dInsert, path[:missing+1])
		}
	}
	switch t.op {
	case "$unset":
		if !bok {
			return
		}
		comps := r.typed(path)
		if comps[len(comps)-1].isIdx {
			r.log(dUpdate, comps, av)
			return
		}
		r.log(dDelete, comps, bson.RawValue{})
	case "$rename":
		if _, ok := lookupPath(r.before, t.from); !ok {
			return
		}
		if bok {
			r.log(dUpdate, r.typed(path), av)
		} else {
			created()
		}
		r.log(dDelete, r.typed(t.from), bson.RawValue{})
	case "$push":
		switch {
		case !bok:
			created()
		case !aok || sameValue(bv, av):
		case t.push.appends(bv, av):
			b, _ := bv.Array().Values()
			a, _ := av.Array().Values()
			comps := r.typed(path)
			for i := len(b); i < len(a); i++ {
				r.log(dInsert, with(comps, pathComp{index: i, isIdx: true}), a[i])
			}
		default:
			r.log(dUpdate, r.typed(path), av)
		}
	default:
		switch {
		case !bok:
			created()
		case !aok || sameValue(bv, av):
		default:
			r.log(dUpdate, r.typed(path), av)
		}
	}
}

// appends reports whether a $push only appended its elements to a
// non-empty array, which MongoDB logs element by element.
func (p pushSpec) appends(bv, av bson.RawValue) bool {
	if bv.Type != bson.TypeArray || av.Type != bson.TypeArray || p.sorted || p.each == 0 {
		return false
	}
	b, _ := bv.Array().Values()
	a, _ := av.Array().Values()
	if len(b) == 0 || p.hasPos && p.pos <= int64(len(b)) || len(a) != len(b)+p.each {
		return false
	}
	for i := range b {
		if !sameValue(b[i], a[i]) {
			return false
		}
	}
	return true
}

// walkBefore looks path up in the document before: its value, whether it
// exists, and the index of the first component that does not.
func (r *logRun) walkBefore(path []string) (bson.RawValue, bool, int) {
	v := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: r.before}
	for i, c := range path {
		next, ok := child(v, c)
		if !ok {
			return bson.RawValue{}, false, i
		}
		v = next
	}
	return v, true, len(path)
}

// typed gives each component of path its kind: an array index where the
// container (before the update, or after it when created) is an array.
func (r *logRun) typed(path []string) []pathComp {
	out := make([]pathComp, len(path))
	b := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: r.before}
	a := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: r.after}
	bok, aok := true, true
	for i, c := range path {
		container := b.Type
		if !bok {
			container = a.Type
		}
		out[i] = pathComp{field: c}
		if n, err := strconv.Atoi(c); err == nil && isNumeric(c) && container == bson.TypeArray && (bok || aok) {
			out[i] = pathComp{index: n, isIdx: true}
		}
		if bok {
			b, bok = child(b, c)
		}
		if aok {
			a, aok = child(a, c)
		}
	}
	return out
}

// logValue logs path with its value after the update.
func (r *logRun) logValue(kind dkind, path []string) {
	v, ok := lookupPath(r.after, path)
	if !ok {
		return
	}
	r.log(kind, r.typed(path), v)
}

// log adds an entry to the diff tree at comps. A path inside a value
// already logged whole is covered by it.
func (r *logRun) log(kind dkind, comps []pathComp, v bson.RawValue) {
	n := r.root
	for i, c := range comps[:len(comps)-1] {
		e := n.find(c)
		if e == nil {
			sub := newNode(comps[i+1].isIdx)
			n.add(&dentry{key: c.field, idx: c.index, kind: dSub, sub: sub})
			n = sub
			continue
		}
		if e.kind != dSub {
			return
		}
		n = e.sub
	}
	c := comps[len(comps)-1]
	if e := n.find(c); e != nil {
		if e.kind == dSub && kind != dDelete {
			e.kind, e.value, e.sub = kind, v, nil
		}
		return
	}
	n.add(&dentry{key: c.field, idx: c.index, kind: kind, value: v})
}

// child returns the field or array element c of v.
func child(v bson.RawValue, c string) (bson.RawValue, bool) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		e, err := v.Document().LookupErr(c)
		return e, err == nil
	case bson.TypeArray:
		if !isNumeric(c) {
			return bson.RawValue{}, false
		}
		i, err := strconv.Atoi(c)
		if err != nil {
			return bson.RawValue{}, false
		}
		e, err := v.Array().IndexErr(uint(i))
		return e, err == nil
	}
	return bson.RawValue{}, false
}

func lookupPath(doc bson.Raw, path []string) (bson.RawValue, bool) {
	v := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}
	for _, c := range path {
		next, ok := child(v, c)
		if !ok {
			return bson.RawValue{}, false
		}
		v = next
	}
	return v, true
}

func withStr(p []string, c string) []string {
	return append(p[:len(p):len(p)], c)
}
