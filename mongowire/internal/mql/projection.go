package mql

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Projection is a compiled find projection (or $project stage): inclusion
// or exclusion of dotted paths, _id rules, computed fields, and in find
// projections $slice, $elemMatch and the positional "a.$". It is safe for
// concurrent use.
type Projection struct {
	inclusion bool
	root      *projNode
	excludeID bool
	empty     bool
	hasPos    bool
}

// projNode is one level of a projection tree.
type projNode struct {
	keys []string
	kids map[string]*projNode

	leaf       bool // included (inclusion) or excluded (exclusion)
	expr       *Expr
	slice      *[2]int64 // skip, limit (skip<0 from end); limit<0 = none
	sliceN     bool      // the single-number form
	elemMatch  *elemMatchOp
	positional bool
}

func (n *projNode) child(key string) *projNode {
	if c, ok := n.kids[key]; ok {
		return c
	}
	if n.kids == nil {
		n.kids = map[string]*projNode{}
	}
	c := &projNode{}
	n.kids[key] = c
	n.keys = append(n.keys, key)
	return c
}

// CompileProjection compiles a find projection. Mixing inclusion and
// exclusion fails with 31254/31253 as in MongoDB.
func CompileProjection(p bson.Raw) (*Projection, error) {
	return compileProjection(p, true)
}

type projParser struct {
	find    bool
	mode    int // 0 unknown, 1 inclusion, -1 exclusion
	proj    *Projection
	idSet   bool
	idValue bool
	paths   []string
}

func compileProjection(p bson.Raw, find bool) (*Projection, error) {
	proj := &Projection{root: &projNode{}}
	if len(p) == 0 || arrayLen(p) == 0 {
		proj.empty = true
		return proj, nil
	}
	if err := p.Validate(); err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid projection: %v", err)
	}
	pp := &projParser{find: find, proj: proj}
	if err := pp.parse(p, ""); err != nil {
		return nil, err
	}
	switch pp.mode {
	case 1:
		proj.inclusion = true
		proj.excludeID = pp.idSet && !pp.idValue
	case -1:
		proj.excludeID = pp.idSet && !pp.idValue
	default:
		// Only _id, $slice or $elemMatch fields.
		if pp.idSet && pp.idValue {
			proj.inclusion = true
		} else {
			proj.excludeID = pp.idSet && !pp.idValue
		}
	}
	return proj, nil
}

func (pp *projParser) setMode(m int, path string) error {
	switch {
	case pp.mode == 0:
		pp.mode = m
	case pp.mode == 1 && m == -1:
		return mongoerr.New(mongoerr.Location31254, "Cannot do exclusion on field %s in inclusion projection", path)
	case pp.mode == -1 && m == 1:
		return mongoerr.New(31253, "Cannot do inclusion on field %s in exclusion projection", path)
	}
	return nil
}

// addPath records a path and refuses collisions like {a: 1, "a.b": 1}.
func (pp *projParser) addPath(path string) (*projNode, error) {
	for _, q := range pp.paths {
		switch {
		case q == path:
			return nil, mongoerr.New(31250, "Path collision at %s", path)
		case strings.HasPrefix(path, q+"."):
			return nil, mongoerr.New(31250, "Path collision at %s remaining portion %s", path, path[len(q)+1:])
		case strings.HasPrefix(q, path+"."):
			return nil, mongoerr.New(31250, "Path collision at %s", path)
		}
	}
	pp.paths = append(pp.paths, path)
	n := pp.proj.root
	for _, c := range strings.Split(path, ".") {
		if c == "" {
			return nil, mongoerr.New(mongoerr.Location15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(c, "$") {
			return nil, mongoerr.New(mongoerr.Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		n = n.child(c)
	}
	return n, nil
}

func (pp *projParser) parse(doc bson.Raw, prefix string) error {
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		key := string(k)
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		if err := pp.field(path, v); err != nil {
			return err
		}
	}
}

func (pp *projParser) field(path string, v bson.RawValue) error {
	if pp.find && strings.HasSuffix(path, ".$") {
		if pp.proj.hasPos {
			return mongoerr.New(31276, "Cannot specify more than one positional projection per query.")
		}
		if !truthy(v) {
			return mongoerr.New(31395, "positional projection cannot be used with exclusion")
		}
		if err := pp.setMode(1, path); err != nil {
			return err
		}
		n, err := pp.addPath(strings.TrimSuffix(path, ".$"))
		if err != nil {
			return err
		}
		n.positional, n.leaf = true, true
		pp.proj.hasPos = true
		return nil
	}
	switch {
	case v.Type == bson.TypeBoolean || isNumeric(v.Type):
		include := truthy(v)
		if path == "_id" {
			pp.idSet, pp.idValue = true, include
			if include {
				_, err := pp.addPath(path)
				if err != nil {
					return err
				}
				pp.proj.root.kids["_id"].leaf = true
			}
			return nil
		}
		m := -1
		if include {
			m = 1
		}
		if err := pp.setMode(m, path); err != nil {
			return err
		}
		n, err := pp.addPath(path)
		if err != nil {
			return err
		}
		n.leaf = true
		return nil
	case v.Type == bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		first, arg, ok := it.next()
		if !ok {
			return mongoerr.New(51270, "An empty sub-projection is not a valid value. Found empty object at path %s", path)
		}
		if len(first) == 0 || first[0] != '$' {
			return pp.parse(v.Value, path)
		}
		if pp.find {
			switch string(first) {
			case "$slice":
				return pp.slice(path, arg)
			case "$elemMatch":
				f, err := pp.elemMatch(path, arg)
				if err != nil {
					return err
				}
				n, err := pp.addPath(path)
				if err != nil {
					return err
				}
				n.elemMatch = f
				if pp.mode == 0 {
					pp.mode = 1
				}
				return nil
			}
		}
	}
	// A computed field.
	e, err := CompileExpr(v)
	if err != nil {
		return err
	}
	if path == "_id" {
		pp.idSet, pp.idValue = true, true
	} else if err := pp.setMode(1, path); err != nil {
		return err
	}
	n, err := pp.addPath(path)
	if err != nil {
		return err
	}
	n.expr = e
	return nil
}

func (pp *projParser) slice(path string, arg bson.RawValue) error {
	var s [2]int64
	single := false
	switch {
	case isNumeric(arg.Type):
		n, _ := integral(arg)
		if asFloat(arg) != float64(n) {
			n = int64(asFloat(arg))
		}
		if n < 0 {
			s = [2]int64{n, -1}
		} else {
			s = [2]int64{0, n}
		}
		single = true
	case arg.Type == bson.TypeArray:
		elems := arrayValues(arg.Value)
		if len(elems) != 2 || !isNumeric(elems[0].Type) || !isNumeric(elems[1].Type) {
			return mongoerr.New(28724, "First argument to $slice must be an array, second argument must be a numeric value")
		}
		s = [2]int64{asInt64(elems[0]), asInt64(elems[1])}
		if s[1] <= 0 {
			return mongoerr.New(28724, "$slice limit must be positive")
		}
	default:
		return mongoerr.New(28667, "Invalid $slice syntax. The given syntax { $slice: %s } did not match the find() syntax because :: Location31273: $slice only supports numbers and [skip, limit] arrays", shortString(arg))
	}
	n, err := pp.addPath(path)
	if err != nil {
		return err
	}
	n.slice, n.sliceN = &s, single
	return nil
}

func (pp *projParser) elemMatch(path string, arg bson.RawValue) (*elemMatchOp, error) {
	if strings.Contains(path, ".") {
		return nil, mongoerr.New(31275, "Cannot use $elemMatch projection on a nested field.")
	}
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.BadValue, "elemMatch: Invalid argument, object required.")
	}
	return parseElemMatch(arg, 0)
}

// Apply projects doc. positional is the array index for a "a.$"
// projection, from Filter.MatchPositional.
func (p *Projection) Apply(doc bson.Raw, positional int) (bson.Raw, error) {
	return p.apply(doc, positional, &evalCtx{root: doc, current: doc, now: time.Now()})
}

func (p *Projection) apply(doc bson.Raw, positional int, c *evalCtx) (bson.Raw, error) {
	if p.empty {
		return doc, nil
	}
	d := newDoc(len(doc))
	var err error
	if p.inclusion {
		err = p.include(d, p.root, doc, positional, c, true)
	} else {
		err = p.exclude(d, p.root, doc, positional, c, true)
	}
	if err != nil {
		return nil, err
	}
	return d.done(), nil
}

func (p *Projection) include(d *docBuilder, n *projNode, doc bson.Raw, pos int, c *evalCtx, top bool) error {
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		key := string(k)
		kid, has := n.kids[key]
		if top && key == "_id" && !p.excludeID && (!has || kid.expr == nil) {
			d.add(key, v)
			continue
		}
		if !has || kid.expr != nil {
			continue
		}
		switch {
		case kid.positional || kid.slice != nil || kid.elemMatch != nil:
			nv, err := special(kid, v, pos)
			if err != nil {
				return err
			}
			d.add(key, nv)
		case kid.leaf:
			d.add(key, v)
		case len(kid.kids) > 0:
			if nv, ok, err := p.includeValue(kid, v, pos, c); err != nil {
				return err
			} else if ok {
				d.add(key, nv)
			}
		}
	}
	// Computed fields, and subtrees holding computed fields for documents
	// that lack the field, come last in specification order.
	for _, key := range n.keys {
		kid := n.kids[key]
		if kid.expr != nil {
			v, err := kid.expr.evalIn(c)
			if err != nil {
				return err
			}
			d.add(key, v)
			continue
		}
		if len(kid.kids) > 0 && hasExpr(kid) && lookup(doc, key).Type == 0 {
			sub := newDoc(32)
			if err := p.include(sub, kid, emptyDoc, pos, c, false); err != nil {
				return err
			}
			d.add(key, vDoc(sub.done()))
		}
	}
	return nil
}

func hasExpr(n *projNode) bool {
	if n.expr != nil {
		return true
	}
	for _, k := range n.kids {
		if hasExpr(k) {
			return true
		}
	}
	return false
}

// includeValue applies an inclusion subtree to a value: documents are
// projected, arrays element by element, scalars dropped.
func (p *Projection) includeValue(n *projNode, v bson.RawValue, pos int, c *evalCtx) (bson.RawValue, bool, error) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		sub := newDoc(len(v.Value))
		if err := p.include(sub, n, v.Value, pos, c, false); err != nil {
			return missing, false, err
		}
		return vDoc(sub.done()), true, nil
	case bson.TypeArray:
		var out []bson.RawValue
		for _, e := range arrayValues(v.Value) {
			nv, ok, err := p.includeValue(n, e, pos, c)
			if err != nil {
				return missing, false, err
			}
			if ok {
				out = append(out, nv)
			}
		}
		return vArray(out), true, nil
	}
	if hasExpr(n) {
		sub := newDoc(32)
		if err := p.include(sub, n, emptyDoc, pos, c, false); err != nil {
			return missing, false, err
		}
		return vDoc(sub.done()), true, nil
	}
	return missing, false, nil
}

func (p *Projection) exclude(d *docBuilder, n *projNode, doc bson.Raw, pos int, c *evalCtx, top bool) error {
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			return nil
		}
		key := string(k)
		if top && key == "_id" && p.excludeID {
			continue
		}
		kid, has := n.kids[key]
		switch {
		case !has:
			d.add(key, v)
		case kid.slice != nil || kid.elemMatch != nil:
			nv, err := special(kid, v, pos)
			if err != nil {
				return err
			}
			d.add(key, nv)
		case kid.leaf:
		default:
			d.add(key, p.excludeValue(kid, v, pos, c))
		}
	}
}

func (p *Projection) excludeValue(n *projNode, v bson.RawValue, pos int, c *evalCtx) bson.RawValue {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		sub := newDoc(len(v.Value))
		_ = p.exclude(sub, n, v.Value, pos, c, false)
		return vDoc(sub.done())
	case bson.TypeArray:
		var out []bson.RawValue
		for _, e := range arrayValues(v.Value) {
			out = append(out, p.excludeValue(n, e, pos, c))
		}
		return vArray(out)
	}
	return v
}

// special applies $slice, $elemMatch or the positional projection.
func special(n *projNode, v bson.RawValue, pos int) (bson.RawValue, error) {
	switch {
	case n.positional:
		if v.Type != bson.TypeArray {
			return v, nil
		}
		elems := arrayValues(v.Value)
		if pos < 0 {
			return missing, mongoerr.New(51246, "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array")
		}
		if pos >= len(elems) {
			return missing, mongoerr.New(51247, "Executor error during find command :: caused by :: positional operator '.$' element mismatch")
		}
		return vArray(elems[pos : pos+1]), nil
	case n.elemMatch != nil:
		if v.Type != bson.TypeArray {
			return missing, nil
		}
		if ok, i := n.elemMatch.test(v, false); ok {
			return vArray([]bson.RawValue{arrayValues(v.Value)[i]}), nil
		}
		return missing, nil
	case n.slice != nil:
		if v.Type != bson.TypeArray {
			return v, nil
		}
		elems := arrayValues(v.Value)
		return vArray(sliceElems(elems, n.slice[0], n.slice[1])), nil
	}
	return v, nil
}

// sliceElems is $slice: skip (negative counts from the end) then take
// limit elements (limit < 0: all the rest).
func sliceElems(elems []bson.RawValue, skip, limit int64) []bson.RawValue {
	l := int64(len(elems))
	start := skip
	if start < 0 {
		start = max(l+start, 0)
	}
	start = min(start, l)
	end := l
	if limit >= 0 {
		end = min(start+limit, l)
	}
	return elems[start:end]
}
