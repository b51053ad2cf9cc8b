package mql

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// IsReplacement reports whether u replaces the whole document.
func (u *Update) IsReplacement() bool { return u.replacement != nil }

// Apply applies u to doc and returns the new document, or doc itself
// when nothing changed. A failing update (changing _id, $inc on a string,
// a path that cannot be created) returns the error and no document.
func (u *Update) Apply(doc bson.Raw, opts ApplyOptions) (bson.Raw, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	oldID := lookup(doc, "_id")
	var out bson.Raw
	switch {
	case u.replacement != nil:
		out = u.replacement
		if oldID.Type != 0 && lookup(out, "_id").Type == 0 {
			d := newDoc(len(out) + len(oldID.Value) + 8)
			d.add("_id", oldID)
			it := iterDoc(out)
			for {
				k, v, ok := it.next()
				if !ok {
					break
				}
				d.addBytesKey(k, v)
			}
			out = d.done()
		}
	case u.pipeline != nil:
		res, err := u.pipeline.run(nil, []bson.Raw{doc}, opts.Now)
		if err != nil {
			return nil, err
		}
		if len(res) != 1 {
			return nil, mongoerr.New(mongoerr.InternalError, "pipeline update produced %d documents", len(res))
		}
		out = res[0]
		if oldID.Type != 0 && lookup(out, "_id").Type == 0 {
			d := newDoc(len(out) + 16)
			d.add("_id", oldID)
			it := iterDoc(out)
			for {
				k, v, ok := it.next()
				if !ok {
					break
				}
				d.addBytesKey(k, v)
			}
			out = d.done()
		}
	default:
		a := &applier{u: u, opts: opts, root: rawNode(vDoc(doc)), doc: doc}
		a.root.load()
		for _, e := range u.entries {
			if e.op == "$setOnInsert" && !opts.Upsert {
				continue
			}
			if err := a.apply(e); err != nil {
				return nil, err
			}
		}
		out = a.root.encodeDoc(make([]byte, 0, len(doc)+32))
		if oldID.Type != 0 {
			// Like mongod, compare _id by value: 1 may become 1.0.
			if newID := lookup(out, "_id"); newID.Type == 0 || Compare(newID, oldID) != 0 {
				return nil, mongoerr.New(mongoerr.ImmutableField, "Performing an update on the path '%s' would modify the immutable field '_id'", u.idPath())
			}
		}
	}
	if bytes.Equal(out, doc) {
		return doc, nil
	}
	if u.entries == nil && oldID.Type != 0 {
		if newID := lookup(out, "_id"); Compare(newID, oldID) != 0 {
			return nil, mongoerr.New(mongoerr.ImmutableField, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", shortString(newID))
		}
	}
	return out, nil
}

// idPath is the first update path that reaches _id.
func (u *Update) idPath() string {
	for _, e := range u.entries {
		if e.path[0] == "_id" {
			return e.dotted
		}
		if e.op == "$rename" && e.to[0] == "_id" {
			return e.toDotted
		}
	}
	return "_id"
}

// applier applies the entries of one update to one document.
type applier struct {
	u      *Update
	opts   ApplyOptions
	root   *mnode
	doc    bson.Raw
	strict bool // a path through a scalar is an error, not a no-op

	targets []target // reused by apply
}

// idString renders the document's _id as MongoDB's error messages do.
func (a *applier) idString() string {
	return "{_id: " + shortString(lookup(a.doc, "_id")) + "}"
}

// target is one concrete location an update path resolved to.
type target struct {
	parent *mnode
	key    string
	path   string // concrete dotted path, for messages
}

// resolve expands the positional parts of path and returns the concrete
// targets under n. When create is set, missing intermediate documents are
// created (as $set does); otherwise a missing or scalar intermediate
// yields no target.
func (a *applier) resolve(n *mnode, path []string, prefix string, create bool, out []target) ([]target, error) {
	comp := path[0]
	keys := []string{comp}
	if isPositionalPart(comp) {
		if n.typ() != bson.TypeArray {
			if comp == "$" {
				return nil, mongoerr.New(mongoerr.BadValue, "The positional operator did not find the match needed from the query.")
			}
			return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply array updates to non-array element %s: %s", lastPart(prefix), shortString(n.value()))
		}
		n.load()
		switch {
		case comp == "$":
			if a.opts.PositionalIndex < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "The positional operator did not find the match needed from the query.")
			}
			keys = []string{strconv.Itoa(a.opts.PositionalIndex)}
		case comp == "$[]":
			keys = keys[:0]
			for i := range n.len() {
				keys = append(keys, strconv.Itoa(i))
			}
		default:
			f := a.u.filters[comp[2:len(comp)-1]]
			id := comp[2 : len(comp)-1]
			keys = keys[:0]
			for i := range n.len() {
				d := newDoc(64)
				d.add(id, n.valueAt(i))
				if f.Match(d.done()) {
					keys = append(keys, strconv.Itoa(i))
				}
			}
		}
	}
	for _, key := range keys {
		full := key
		if prefix != "" {
			full = prefix + "." + key
		}
		if len(path) == 1 {
			if n.typ() == bson.TypeArray {
				if _, ok := arrayIndex(key); !ok {
					if !create {
						continue
					}
					return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", key, lastPart(prefix), shortString(n.value()))
				}
			}
			out = append(out, target{parent: n, key: key, path: full})
			continue
		}
		c := n.child(key)
		if n.typ() == bson.TypeArray {
			if _, ok := arrayIndex(key); !ok {
				if !create && a.strict {
					return nil, a.notViable(key, prefix, path, n)
				}
				if !create {
					continue
				}
				return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", key, lastPart(prefix), shortString(n.value()))
			}
		}
		if c == nil {
			if !create {
				continue
			}
			if isPositionalPart(path[1]) {
				return nil, mongoerr.New(mongoerr.BadValue, "The path '%s' must exist in the document in order to apply array updates.", full)
			}
			c = newDocNode()
			n.set(key, c)
		}
		if !c.isContainer() {
			if !create && a.strict {
				return nil, a.notViable(path[1], full, path[1:], c)
			}
			if !create {
				continue
			}
			if isPositionalPart(path[1]) {
				return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply array updates to non-array element %s: %s", key, shortString(c.value()))
			}
			return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", path[1], key, shortString(c.value()))
		}
		var err error
		out, err = a.resolve(c, path[1:], full, create, out)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notViable is the error of $pop, $pull and $pullAll when their path
// runs into a value it cannot traverse.
func (a *applier) notViable(part, taken string, rest []string, n *mnode) error {
	return mongoerr.New(mongoerr.PathNotViable, "Cannot use the part (%s) of (%s.%s) to traverse the element ({%s: %s})",
		part, taken, strings.Join(rest, "."), lastPart(taken), shortString(n.value()))
}

func lastPart(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func createsPath(op string) bool {
	switch op {
	case "$unset", "$pop", "$pull", "$pullAll":
		return false
	}
	return true
}

func (a *applier) apply(e *updateEntry) error {
	if e.op == "$rename" {
		return a.rename(e)
	}
	a.strict = e.op == "$pop" || e.op == "$pull" || e.op == "$pullAll"
	var err error
	a.targets, err = a.resolve(a.root, e.path, "", createsPath(e.op), a.targets[:0])
	if err != nil {
		return err
	}
	for _, t := range a.targets {
		if err := a.applyAt(e, t); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyAt(e *updateEntry, t target) error {
	setVal := func(v bson.RawValue) { t.parent.setValue(t.key, v) }
	if e.op == "$set" || e.op == "$setOnInsert" {
		// The most common update needs no node for the field it sets.
		setVal(e.arg)
		return nil
	}
	cur := t.parent.child(t.key)
	switch e.op {
	case "$set", "$setOnInsert":
		setVal(e.arg)
	case "$unset":
		if cur != nil {
			t.parent.remove(t.key)
		}
	case "$inc", "$mul":
		if cur == nil {
			if e.op == "$inc" {
				setVal(e.arg)
			} else {
				setVal(zeroLike(e.arg))
			}
			return nil
		}
		v := cur.value()
		if !isNumeric(v.Type) {
			return mongoerr.New(mongoerr.TypeMismatch, "Cannot apply %s to a value of non-numeric type. %s has the field '%s' of non-numeric type %s", e.op, a.idString(), t.key, typeName(v.Type))
		}
		op := opAdd
		if e.op == "$mul" {
			op = opMul
		}
		r := arith(op, v, e.arg)
		if r.Type == bson.TypeDouble && v.Type != bson.TypeDouble && e.arg.Type != bson.TypeDouble {
			// Integer overflow past int64: MongoDB refuses the write.
			return mongoerr.New(mongoerr.BadValue, "Failed to apply %s operations to current value (%s) for document %s", e.op, safeNumString(v), a.idString())
		}
		setVal(r)
	case "$min", "$max":
		if cur == nil {
			setVal(e.arg)
			return nil
		}
		c := compareColl(e.coll, e.arg, cur.value())
		if (e.op == "$min" && c < 0) || (e.op == "$max" && c > 0) {
			setVal(e.arg)
		}
	case "$currentDate":
		if e.arg.Type == bson.TypeEmbeddedDocument && str(lookup(e.arg.Value, "$type")) == "timestamp" {
			setVal(vTimestamp(uint32(a.opts.Now.Unix()), 1))
		} else {
			setVal(vTime(a.opts.Now))
		}
	case "$bit":
		var v bson.RawValue
		if cur == nil {
			v = vInt32(0)
		} else {
			v = cur.value()
		}
		if v.Type != bson.TypeInt32 && v.Type != bson.TypeInt64 {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply $bit to a value of non-integral type.%s has the field %s of non-integer type %s", a.idString(), t.key, typeName(v.Type))
		}
		for _, b := range e.bitOps {
			x, y := asInt64(v), asInt64(b.v)
			var r int64
			switch b.name {
			case "and":
				r = x & y
			case "or":
				r = x | y
			default:
				r = x ^ y
			}
			if v.Type == bson.TypeInt32 && b.v.Type == bson.TypeInt32 {
				v = vInt32(int32(r))
			} else {
				v = vInt64(r)
			}
		}
		setVal(v)
	case "$push", "$addToSet":
		if cur == nil {
			cur = &mnode{open: true, isArr: true}
			t.parent.set(t.key, cur)
		} else if cur.typ() != bson.TypeArray {
			if e.op == "$addToSet" {
				return mongoerr.New(mongoerr.BadValue, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", t.key, typeName(cur.typ()))
			}
			return mongoerr.New(mongoerr.BadValue, "The field '%s' must be an array but is of type %s in document %s", t.path, typeName(cur.typ()), a.idString())
		}
		elems := cur.values()
		if e.op == "$push" {
			elems = e.push.apply(elems)
		} else {
			for _, v := range e.each {
				if !slices.ContainsFunc(elems, func(x bson.RawValue) bool { return compareColl(e.coll, x, v) == 0 }) {
					elems = append(elems, v)
				}
			}
		}
		cur.setValues(elems)
	case "$pop":
		if cur == nil {
			return nil
		}
		if cur.typ() != bson.TypeArray {
			return mongoerr.New(mongoerr.TypeMismatch, "Path '%s' contains an element of non-array type '%s'", t.path, typeName(cur.typ()))
		}
		elems := cur.values()
		if len(elems) == 0 {
			return nil
		}
		if asFloat(e.arg) > 0 {
			elems = elems[:len(elems)-1]
		} else {
			elems = elems[1:]
		}
		cur.setValues(elems)
	case "$pull", "$pullAll":
		if cur == nil {
			return nil
		}
		if cur.typ() != bson.TypeArray {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply $pull to a non-array value")
		}
		elems := cur.values()
		kept := elems[:0:0]
		for _, x := range elems {
			if !e.pulls(x) {
				kept = append(kept, x)
			}
		}
		if len(kept) != len(elems) {
			cur.setValues(kept)
		}
	}
	return nil
}

// pulls reports whether $pull/$pullAll removes element x.
func (e *updateEntry) pulls(x bson.RawValue) bool {
	switch {
	case e.op == "$pullAll":
		return slices.ContainsFunc(e.each, func(v bson.RawValue) bool { return compareColl(e.coll, x, v) == 0 })
	case e.pullEq:
		return compareColl(e.coll, x, e.arg) == 0
	case e.pullWrap:
		return e.pull.match(wrapValue(x), nil)
	}
	return x.Type == bson.TypeEmbeddedDocument && e.pull.match(x.Value, nil)
}

func (p *pushSpec) apply(elems []bson.RawValue) []bson.RawValue {
	pos := int64(len(elems))
	if p.position != nil {
		pos = *p.position
		if pos < 0 {
			pos = max(int64(len(elems))+pos, 0)
		}
		pos = min(pos, int64(len(elems)))
	}
	out := make([]bson.RawValue, 0, len(elems)+len(p.each))
	out = append(out, elems[:pos]...)
	out = append(out, p.each...)
	out = append(out, elems[pos:]...)
	switch {
	case p.sortDir != 0:
		slices.SortStableFunc(out, func(a, b bson.RawValue) int { return p.sortDir * compareColl(p.coll, a, b) })
	case p.sort != nil:
		slices.SortStableFunc(out, func(a, b bson.RawValue) int {
			return p.sort.Compare(docOrEmpty(a), docOrEmpty(b))
		})
	}
	if p.slice != nil {
		n := *p.slice
		switch {
		case n >= 0 && n < int64(len(out)):
			out = out[:n]
		case n < 0 && -n < int64(len(out)):
			out = out[int64(len(out))+n:]
		}
	}
	return out
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

func docOrEmpty(v bson.RawValue) bson.Raw {
	if v.Type == bson.TypeEmbeddedDocument {
		return v.Value
	}
	return emptyDoc
}

func (a *applier) rename(e *updateEntry) error {
	id := "_id: " + shortString(lookup(a.doc, "_id"))
	// Find the source; a path through an array is refused, one through a
	// scalar is not viable, a missing one makes the rename a no-op.
	n := a.root
	for i, c := range e.path {
		switch n.typ() {
		case bson.TypeArray:
			return mongoerr.New(mongoerr.BadValue, "The source field cannot be an array element, '%s' in doc with %s has an array field called '%s'", e.dotted, id, e.path[i-1])
		case bson.TypeEmbeddedDocument:
		default:
			return mongoerr.New(mongoerr.PathNotViable, "cannot use the part (%s of %s) to traverse the element ({%s: %s})", c, e.dotted, e.path[i-1], shortString(n.value()))
		}
		if i == len(e.path)-1 {
			break
		}
		next := n.child(c)
		if next == nil {
			return nil
		}
		n = next
	}
	src := n.child(e.path[len(e.path)-1])
	if src == nil {
		return nil
	}
	v := src.value()
	// The destination must not run through an array either.
	d := a.root
	for _, c := range e.to[:len(e.to)-1] {
		next := d.child(c)
		if next == nil {
			break
		}
		if next.typ() == bson.TypeArray {
			return mongoerr.New(mongoerr.BadValue, "The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'", e.toDotted, id, c)
		}
		if next.typ() != bson.TypeEmbeddedDocument {
			break
		}
		d = next
	}
	if e.path[0] == "_id" && lookup(a.doc, "_id").Type != 0 {
		return mongoerr.New(mongoerr.ImmutableField, "Unsetting the path '%s' using $rename would modify the immutable field '_id'", e.dotted)
	}
	n.remove(e.path[len(e.path)-1])
	targets, err := a.resolve(a.root, e.to, "", true, nil)
	if err != nil {
		return err
	}
	for _, t := range targets {
		t.parent.set(t.key, rawNode(v))
	}
	return nil
}

// safeNumString renders a number as MongoDB's SafeNum debug string.
func safeNumString(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32:
		return "(NumberInt)" + strconv.FormatInt(asInt64(v), 10)
	case bson.TypeInt64:
		return "(NumberLong)" + strconv.FormatInt(asInt64(v), 10)
	case bson.TypeDouble:
		return "(NumberDouble)" + strconv.FormatFloat(asFloat(v), 'g', -1, 64)
	}
	return "(NumberDecimal)" + v.Decimal128().String()
}
