package mql

import (
	"encoding/binary"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Stages that read other collections: $lookup, $unionWith.

type lookupStage struct {
	from, as     string
	localField   []string
	foreignField string

	// The pipeline form: sub runs over the foreign documents; with let, the
	// pipeline is bound to each input document's values and compiled per
	// document (letNames/letExprs), otherwise compiled once.
	pipeline bson.RawValue
	sub      *Pipeline
	letNames []string
	letExprs []*Expr
}

func compileLookup(v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $lookup specification must be an Object")
	}
	s := &lookupStage{}
	var local string
	it := iterDoc(v.Value)
	for {
		k, f, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "from", "as", "localField", "foreignField":
			if f.Type != bson.TypeString {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument '%s: %s' must be a string, is type %s", k, shortString(f), typeName(f.Type))
			}
			switch string(k) {
			case "from":
				s.from = str(f)
			case "as":
				s.as = str(f)
			case "localField":
				local = str(f)
			default:
				s.foreignField = str(f)
			}
		case "pipeline":
			if f.Type != bson.TypeArray {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'pipeline' must be an array, is type %s", typeName(f.Type))
			}
			s.pipeline = f
		case "let":
			if f.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup argument 'let' must be an object, is type %s", typeName(f.Type))
			}
			lit := iterDoc(f.Value)
			for {
				name, ev, ok := lit.next()
				if !ok {
					break
				}
				if !isVarName(string(name)) || name[0] < 'a' || name[0] > 'z' {
					return nil, mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", name)
				}
				e, err := CompileExpr(ev)
				if err != nil {
					return nil, err
				}
				s.letNames = append(s.letNames, string(name))
				s.letExprs = append(s.letExprs, e)
			}
		default:
			return nil, mongoerr.New(mongoerr.FailedToParse, "unknown argument to $lookup: %s", k)
		}
	}
	switch {
	case s.from == "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'from' field for a $lookup")
	case s.as == "":
		return nil, mongoerr.New(mongoerr.FailedToParse, "must specify 'as' field for a $lookup")
	case s.pipeline.Type == 0 && (local == "" || s.foreignField == ""):
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")
	case (local == "") != (s.foreignField == ""):
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup requires both or neither of 'localField' and 'foreignField' to be specified")
	case s.pipeline.Type == 0 && len(s.letNames) > 0:
		return nil, mongoerr.New(mongoerr.FailedToParse, "$lookup with 'let' requires 'pipeline' to be specified")
	}
	if local != "" {
		s.localField = strings.Split(local, ".")
	}
	if s.pipeline.Type != 0 {
		// Compile now: once for good without let, and with the variables
		// bound to null to report errors early with let.
		sub, err := s.compileSub(nil)
		if err != nil {
			return nil, err
		}
		if len(s.letNames) == 0 {
			s.sub = sub
		}
	}
	return s, nil
}

// compileSub compiles the sub-pipeline with the let variables bound to
// vals (null when vals is nil).
func (s *lookupStage) compileSub(vals []bson.RawValue) (*Pipeline, error) {
	p := s.pipeline
	if len(s.letNames) > 0 {
		let := newDoc(64)
		for i, n := range s.letNames {
			v := nullValue
			if vals != nil {
				v = vals[i]
			}
			if v.Type == 0 {
				let.add(n, vString("$$REMOVE"))
				continue
			}
			lit := newDoc(len(v.Value) + 16)
			lit.add("$literal", v)
			let.add(n, vDoc(lit.done()))
		}
		var err error
		if p, err = BindLet(p, let.done()); err != nil {
			return nil, err
		}
	}
	var stages []bson.Raw
	for _, st := range arrayValues(p.Value) {
		if st.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		stages = append(stages, st.Value)
	}
	return CompilePipeline(stages)
}

func (s *lookupStage) newProc(c *runCtx, _ stageAt, next proc) proc {
	return &lookupProc{c: c, s: s, asPath: strings.Split(s.as, "."), next: next}
}

// lookupProc joins each input document with the foreign documents that
// match it. The matches of one document are bounded by the $lookup limit
// (4568 past it) and reserved from the budget while the joined document
// goes down the pipeline; only one joined document is built at a time.
type lookupProc struct {
	c       *runCtx
	s       *lookupStage
	asPath  []string
	next    proc
	loaded  bool
	foreign []bson.Raw
}

func (p *lookupProc) push(d bson.Raw) error {
	c, s := p.c, p.s
	if !p.loaded && c.env != nil {
		var err error
		if p.foreign, err = c.env.Collection(s.from); err != nil {
			return err
		}
	}
	p.loaded = true
	candidates := p.foreign
	if s.localField != nil {
		candidates = s.equalityMatches(d, p.foreign)
	}
	limit := c.lim.lookupBytes()
	var matched []bson.Raw
	var size int64
	defer func() { c.mem.shrink(size) }()
	add := func(r bson.Raw) error {
		n := int64(len(r)) + docOverhead
		if size+n > limit {
			return errLookupTooBig(s.from, limit)
		}
		if err := c.mem.grow(n); err != nil {
			return err
		}
		size += n
		matched = append(matched, r)
		return nil
	}
	if s.pipeline.Type == 0 {
		for _, f := range candidates {
			if err := add(f); err != nil {
				return err
			}
		}
	} else {
		sub := s.sub
		if sub == nil {
			vals := make([]bson.RawValue, len(s.letExprs))
			for j, e := range s.letExprs {
				v, err := c.eval(e, d)
				if err != nil {
					return err
				}
				vals[j] = v
			}
			var err error
			if sub, err = s.compileSub(vals); err != nil {
				return err
			}
		}
		if err := sub.stream(c, candidates, add); err != nil {
			return err
		}
	}
	if len(p.asPath) == 1 && lookup(d, p.s.as).Type == 0 {
		return p.next.push(appendJoined(d, p.s.as, matched))
	}
	vals := make([]bson.RawValue, len(matched))
	for i, m := range matched {
		vals[i] = vDoc(m)
	}
	root := rawNode(vDoc(d))
	root.load()
	setField(root, p.asPath, vArray(vals))
	return p.next.push(root.encodeDoc(nil))
}

// appendJoined returns d with the array of matched documents appended as
// field as, which d does not have: what setField makes of it, built in
// one buffer of the right size, since the array may be large.
func appendJoined(d bson.Raw, as string, matched []bson.Raw) bson.Raw {
	d = d[:binary.LittleEndian.Uint32(d)]
	size := len(d) + len(as) + 2 + 5
	for i, m := range matched {
		size += 2 + len(strconv.Itoa(i)) + len(m)
	}
	b := make([]byte, 0, size)
	b = append(b, d[:len(d)-1]...) // the elements, without the terminating 0
	b = append(b, byte(bson.TypeArray))
	b = append(b, as...)
	b = append(b, 0)
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for i, m := range matched {
		b = append(b, byte(bson.TypeEmbeddedDocument))
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, 0)
		b = append(b, m...)
	}
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
	b = append(b, 0)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func (p *lookupProc) end() error { return p.next.end() }

// equalityMatches returns the foreign documents whose foreignField
// matches d's localField, with query semantics (arrays match by element,
// a missing local value matches null and missing).
func (s *lookupStage) equalityMatches(d bson.Raw, foreign []bson.Raw) []bson.Raw {
	local := evalPath(vDoc(d), s.localField)
	var op valueOp
	switch {
	case local.Type == bson.TypeArray:
		in := &inOp{}
		for _, e := range arrayValues(local.Value) {
			if e.Type == bson.TypeNull {
				in.hasNull = true
				continue
			}
			in.vals = append(in.vals, e)
		}
		op = in
	case local.Type == 0:
		op = newEqOp(nullValue)
	default:
		op = newEqOp(local)
	}
	n := newFieldNode(s.foreignField, op)
	var out []bson.Raw
	for _, f := range foreign {
		if n.match(f, nil) {
			out = append(out, f)
		}
	}
	return out
}

type unionWithStage struct {
	coll string
	sub  *Pipeline
}

func compileUnionWith(v bson.RawValue) (stage, error) {
	s := &unionWithStage{}
	switch v.Type {
	case bson.TypeString:
		s.coll = str(v)
	case bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		for {
			k, f, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "coll":
				if f.Type != bson.TypeString {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$unionWith.coll' is the wrong type '%s', expected type 'string'", typeName(f.Type))
				}
				s.coll = str(f)
			case "pipeline":
				if f.Type != bson.TypeArray {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field '$unionWith.pipeline' is the wrong type '%s', expected type 'array'", typeName(f.Type))
				}
				var stages []bson.Raw
				for _, st := range arrayValues(f.Value) {
					if st.Type != bson.TypeEmbeddedDocument {
						return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
					}
					stages = append(stages, st.Value)
				}
				p, err := CompilePipeline(stages)
				if err != nil {
					return nil, err
				}
				s.sub = p
			default:
				return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$unionWith.%s' is an unknown field.", k)
			}
		}
		if s.coll == "" {
			return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$unionWith.coll' is missing but a required field")
		}
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "the $unionWith stage specification must be an object or string, but found %s", typeName(v.Type))
	}
	return s, nil
}

func (s *unionWithStage) newProc(c *runCtx, _ stageAt, next proc) proc {
	return &unionWithProc{c: c, s: s, next: next}
}

// unionWithProc passes its input on, then the documents of the other
// collection (through the sub-pipeline, if any).
type unionWithProc struct {
	c    *runCtx
	s    *unionWithStage
	next proc
	done bool // the next proc has enough
}

func (p *unionWithProc) push(d bson.Raw) error {
	err := p.next.push(d)
	if err == errEnough {
		p.done = true
	}
	return err
}

func (p *unionWithProc) end() error {
	if p.done {
		return p.next.end()
	}
	var docs []bson.Raw
	if p.c.env != nil {
		var err error
		if docs, err = p.c.env.Collection(p.s.coll); err != nil {
			return err
		}
	}
	if p.s.sub == nil {
		return feed(p.next, docs)
	}
	err := p.s.sub.stream(p.c, docs, p.next.push)
	if err != nil && err != errEnough {
		return err
	}
	return p.next.end()
}
