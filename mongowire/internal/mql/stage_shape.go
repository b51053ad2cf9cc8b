package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Stages that reshape documents: $project, $unset, $addFields/$set,
// $replaceRoot/$replaceWith.

// compileProjectStage compiles $project.
func compileProjectStage(name string, v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(15969, "$project specification must be an object")
	}
	if arrayLen(v.Value) == 0 {
		return nil, mongoerr.New(51272, "Invalid $project :: caused by :: projection specification must have at least one field")
	}
	p, err := compileProjection(v.Value, false)
	if err != nil {
		return nil, wrapStage(name, err)
	}
	return projectStage{p}, nil
}

type projectStage struct{ p *Projection }

func (s projectStage) each(c *runCtx, d bson.Raw, emit func(bson.Raw) error) error {
	r, err := s.p.apply(d, -1, &evalCtx{root: d, current: d, now: c.now, coll: c.coll})
	if err != nil {
		return err
	}
	return emit(r)
}

// compileUnsetStage compiles $unset.
func compileUnsetStage(name string, v bson.RawValue) (stage, error) {
	var fields []bson.RawValue
	switch v.Type {
	case bson.TypeString:
		fields = []bson.RawValue{v}
	case bson.TypeArray:
		fields = arrayValues(v.Value)
	}
	if len(fields) == 0 {
		return nil, mongoerr.New(31002, "$unset specification must be a string or an array with at least one field")
	}
	d := newDoc(64)
	for _, f := range fields {
		if f.Type != bson.TypeString {
			return nil, mongoerr.New(31120, "$unset specification must be a string or an array containing only string values")
		}
		d.add(str(f), vInt32(0))
	}
	p, err := compileProjection(d.done(), false)
	if err != nil {
		return nil, err
	}
	return projectStage{p}, nil
}

// compileAddFieldsStage compiles $addFields and $set.
func compileAddFieldsStage(name string, v bson.RawValue) (stage, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40272, "%s specification stage must be an object, got %s", name, typeName(v.Type))
	}
	if arrayLen(v.Value) == 0 {
		return nil, mongoerr.New(40177, "Invalid %s :: caused by :: specification must have at least one field", name)
	}
	st, err := compileAddFields(v.Value)
	if err != nil {
		return nil, wrapStage(name, err)
	}
	return st, nil
}

type addField struct {
	path []string
	e    *Expr
}

type addFieldsStage []addField

func compileAddFields(spec bson.Raw) (stage, error) {
	var s addFieldsStage
	it := iterDoc(spec)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		parts := strings.Split(string(k), ".")
		if err := checkPathParts(parts); err != nil {
			return nil, err
		}
		// A nested document of expressions is flattened into paths, so
		// {a: {b: 1}} merges b into an existing a.
		if v.Type == bson.TypeEmbeddedDocument && !isOperatorDoc(v) && arrayLen(v.Value) > 0 {
			sub, err := compileAddFields(v.Value)
			if err != nil {
				return nil, err
			}
			for _, f := range sub.(addFieldsStage) {
				s = append(s, addField{path: append(append([]string{}, parts...), f.path...), e: f.e})
			}
			continue
		}
		e, err := CompileExpr(v)
		if err != nil {
			return nil, err
		}
		s = append(s, addField{path: parts, e: e})
	}
	return s, nil
}

func (s addFieldsStage) each(c *runCtx, d bson.Raw, emit func(bson.Raw) error) error {
	root := rawNode(vDoc(d))
	root.load()
	ec := &evalCtx{root: d, current: d, now: c.now, coll: c.coll}
	for _, f := range s {
		v, err := f.e.evalIn(ec)
		if err != nil {
			return err
		}
		setField(root, f.path, v)
	}
	return emit(root.encodeDoc(make([]byte, 0, len(d)+32)))
}

// setField sets path to v as $addFields does: through arrays it sets the
// field in every element; a missing v removes the field.
func setField(n *mnode, path []string, v bson.RawValue) {
	if n.typ() == bson.TypeArray {
		n.load()
		for i := range n.len() {
			k := n.at(i)
			if !k.isContainer() {
				k = newDocNode()
				n.setAt(i, k)
			}
			setField(k, path, v)
		}
		return
	}
	n.load()
	if len(path) == 1 {
		if v.Type == 0 {
			n.remove(path[0])
			return
		}
		n.set(path[0], rawNode(v))
		return
	}
	c := n.child(path[0])
	if c == nil || !c.isContainer() {
		if v.Type == 0 {
			return
		}
		c = newDocNode()
		n.set(path[0], c)
	}
	setField(c, path[1:], v)
}

// compileReplaceRootStage compiles $replaceRoot and $replaceWith.
func compileReplaceRootStage(name string, v bson.RawValue) (stage, error) {
	root := v
	if name == "$replaceRoot" {
		if v.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(40228, "$replaceRoot requires an object as its argument")
		}
		root = lookup(v.Value, "newRoot")
		if root.Type == 0 {
			return nil, mongoerr.New(40231, "no newRoot specified for the $replaceRoot stage")
		}
	}
	e, err := CompileExpr(root)
	if err != nil {
		return nil, err
	}
	return replaceRootStage{e}, nil
}

type replaceRootStage struct{ e *Expr }

func (s replaceRootStage) each(c *runCtx, d bson.Raw, emit func(bson.Raw) error) error {
	v, err := c.eval(s.e, d)
	if err != nil {
		return err
	}
	if v.Type != bson.TypeEmbeddedDocument {
		shown := "MISSING"
		if v.Type != 0 {
			shown = shortString(v)
		}
		return mongoerr.New(40228, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", shown, typeName(v.Type), docString(d))
	}
	return emit(v.Value)
}

// wrapStage words a parse error as MongoDB does for $project and
// $addFields: "Invalid $project :: caused by :: <message>".
func wrapStage(name string, err error) error {
	if e, ok := mongoerr.As(err); ok {
		return mongoerr.New(e.Code, "Invalid %s :: caused by :: %s", name, e.Message)
	}
	return err
}
