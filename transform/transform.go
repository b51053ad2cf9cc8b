package transform

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// Step is one transform: exactly one of its fields is set. A pipeline
// file's transforms: list holds Steps, and a program builds the same
// list in code.
type Step struct {
	// Filter keeps the changes that pass every condition it sets.
	Filter *Filter
	// DropFields removes fields, named by dotted paths, from the
	// document, the before-image and the update description.
	DropFields []string
	// KeepFields removes every field but these (and _id).
	KeepFields []string
	// RenameFields renames fields: Path is the field, Value its new
	// name (in the same document).
	RenameFields []Field
	// MaskFields replaces values: Path is the field, Value the method:
	// hash, last4 or redact.
	MaskFields []Field
	// Set sets fields of the document: Path is the field, Value a CEL
	// expression whose result is the field's new value.
	Set []Field
	// Route is a CEL expression giving the change's route, a string
	// that fills {route} in a sink's templates.
	Route string
	// Func is a program's own transform. FuncName names it in metrics
	// and errors.
	Func     Func
	FuncName string
}

// Filter is the filter transform: a change passes when its op is one of
// Ops (if set), its namespace matches one of Namespaces (if set; path.Match
// patterns such as "shop.*") and Where (a CEL expression, if set) is true.
type Filter struct {
	Ops        []string
	Namespaces []string
	Where      string
}

// Field is a field path and its setting, in the order written.
type Field struct {
	Path, Value string
}

// Func is a transform written in Go. It changes ev in place (a document
// field replaced by new BSON, never written into) and returns keep =
// false to drop it. It must be deterministic, and safe for concurrent
// use: the encode stage calls it on many changes at once.
type Func func(ev *cdc.Event) (keep bool, err error)

// Kind names the transform a Step is: its key in a pipeline file.
func (s *Step) Kind() string {
	switch {
	case s.Filter != nil:
		return "filter"
	case s.DropFields != nil:
		return "drop_fields"
	case s.KeepFields != nil:
		return "keep_fields"
	case s.RenameFields != nil:
		return "rename_fields"
	case s.MaskFields != nil:
		return "mask_fields"
	case s.Set != nil:
		return "set"
	case s.Route != "":
		return "route"
	case s.Func != nil:
		return "func"
	}
	return ""
}

func (s *Step) kinds() int {
	n := 0
	for _, set := range []bool{s.Filter != nil, s.DropFields != nil, s.KeepFields != nil, s.RenameFields != nil,
		s.MaskFields != nil, s.Set != nil, s.Route != "", s.Func != nil} {
		if set {
			n++
		}
	}
	return n
}

// Options are the settings of a Chain beyond its steps.
type Options struct {
	// MaskKey is the key of mask_fields' hash; required by one.
	MaskKey []byte
	// CostLimit bounds each expression's cost; 0 means DefaultCostLimit.
	CostLimit uint64
}

// Error is a transform's failure on one change, or a step that does not
// compile. Path names the transform and key ("transforms[2].set.region").
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Chain is a compiled list of transforms. It is safe for concurrent use.
type Chain struct {
	steps []step
	// jsonDocs: a field or set step works on documents, so a JSON message
	// payload is parsed into one first.
	jsonDocs bool
}

type step struct {
	name    string // transforms[i].kind, or a Func's name
	dropped atomic.Uint64
	apply   func(ev *cdc.Event) (bool, error)
}

// Compile checks and compiles steps. Every problem is returned, joined,
// each an *Error whose Path names the step and key, wrapping an
// *ExprError for an expression that does not compile.
func Compile(steps []Step, opts Options) (*Chain, error) {
	if opts.CostLimit == 0 {
		opts.CostLimit = DefaultCostLimit
	}
	c := &Chain{steps: make([]step, len(steps))}
	var errs []error
	for i := range steps {
		s := &steps[i]
		base := fmt.Sprintf("transforms[%d]", i)
		if n := s.kinds(); n != 1 {
			errs = append(errs, &Error{base, fmt.Errorf("a transform sets exactly one of filter, drop_fields, keep_fields, rename_fields, mask_fields, set, route; found %d", n)})
			continue
		}
		kind := s.Kind()
		base += "." + kind
		c.steps[i].name = base
		if kind == "func" && s.FuncName != "" {
			c.steps[i].name = s.FuncName
		}
		fail := func(key string, err error) {
			p := base
			if key != "" && !strings.HasPrefix(key, "[") {
				p += "."
			}
			p += key
			errs = append(errs, &Error{p, err})
		}
		switch kind {
		case "filter":
			c.steps[i].apply = compileFilter(s.Filter, opts, fail)
		case "drop_fields", "keep_fields":
			paths, k := s.DropFields, dropKind
			if kind == "keep_fields" {
				paths, k = s.KeepFields, keepKind
			}
			f := &fields{kind: k, root: &node{}}
			if k == keepKind {
				f.root.add("_id")
			}
			for j, p := range paths {
				if k == dropKind && (p == "_id" || strings.HasPrefix(p, "_id.")) {
					fail(fmt.Sprintf("[%d]", j), errors.New("the document key (_id) is never dropped"))
					continue
				}
				if _, err := f.root.add(p); err != nil {
					fail(fmt.Sprintf("[%d]", j), err)
				}
			}
			c.steps[i].apply = f.event
			c.jsonDocs = true
		case "rename_fields", "mask_fields":
			list, k := s.RenameFields, renameKind
			if kind == "mask_fields" {
				list, k = s.MaskFields, maskKind
			}
			f := &fields{kind: k, root: &node{}}
			for _, fl := range list {
				if fl.Path == "_id" || strings.HasPrefix(fl.Path, "_id.") {
					fail(fl.Path, errors.New("the document key (_id) is never renamed or masked"))
					continue
				}
				n, err := f.root.add(fl.Path)
				if err != nil {
					fail(fl.Path, err)
					continue
				}
				if k == renameKind {
					if fl.Value == "" || strings.ContainsAny(fl.Value, ".$") || fl.Value == "_id" {
						fail(fl.Path, fmt.Errorf("%q is not a new field name: a name without dots or $, other than _id, in the same document", fl.Value))
					}
					n.rename = fl.Value
				} else {
					m, err := maskFunc(fl.Value, opts.MaskKey)
					if err != nil {
						fail(fl.Path, err)
					}
					n.mask = m
				}
			}
			c.steps[i].apply = f.event
			c.jsonDocs = true
		case "set":
			c.steps[i].apply = compileSet(s.Set, opts, fail)
			c.jsonDocs = true
		case "route":
			e, err := compileExpr(s.Route, cel.StringType, opts.CostLimit)
			if err != nil {
				fail("", err)
				continue
			}
			c.steps[i].apply = func(ev *cdc.Event) (bool, error) {
				v, err := e.eval(ev)
				if err != nil {
					return false, err
				}
				r, ok := v.(types.String)
				if !ok {
					return false, fmt.Errorf("the route is a %s, not a string", v.Type().TypeName())
				}
				ev.Route = string(r)
				return true, nil
			}
		case "func":
			c.steps[i].apply = s.Func
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// Len returns the number of steps.
func (c *Chain) Len() int { return len(c.steps) }

// Apply runs the chain on ev, changing it in place. It returns keep =
// false when a filter dropped it (counted in Dropped), and an *Error
// naming the transform that failed.
//
// The change owns its documents, as a source hands them out: Apply may
// write over their bytes (a drop of whole fields moves the rest over
// them, with no copy). A caller that needs the change as it was, for a
// dead letter, clones it first, as the pipeline does with on_error:
// dead_letter.
func (c *Chain) Apply(ev *cdc.Event) (keep bool, err error) {
	// A source's document may be a slice of a larger buffer: its
	// capacity is cut, so that room past its end is only ever what a
	// transform made (setPath appends there).
	ev.FullDocument = ev.FullDocument[:len(ev.FullDocument):len(ev.FullDocument)]
	ev.PreImage = ev.PreImage[:len(ev.PreImage):len(ev.PreImage)]
	parsed := false
	if c.jsonDocs && ev.PayloadFormat == cdc.PayloadJSON && ev.FullDocument == nil {
		v, err := parseJSON(ev.Payload)
		if err != nil {
			return false, &Error{"payload", err}
		}
		if v.Type == bson.TypeEmbeddedDocument {
			ev.FullDocument, parsed = v.Value, true
		}
	}
	for i := range c.steps {
		s := &c.steps[i]
		keep, err := s.apply(ev)
		if err != nil {
			// A step names the key that failed, if any, with an *Error
			// whose Path is relative to the step.
			var te *Error
			if errors.As(err, &te) {
				path := s.name
				if te.Path != "" {
					path += "." + te.Path
				}
				return false, &Error{path, te.Err}
			}
			return false, &Error{s.name, err}
		}
		if !keep {
			s.dropped.Add(1)
			return false, nil
		}
	}
	if parsed { // back to the message's JSON, as changed
		doc := ev.FullDocument
		ev.FullDocument = nil
		out, err := encode.AppendRelaxed(nil, doc)
		if err != nil {
			return false, &Error{"payload", err}
		}
		ev.Payload = out
	}
	return true, nil
}

// Dropped is the count of changes one transform dropped.
type Dropped struct {
	Transform string
	Count     uint64
}

// Dropped returns, for each step, the changes it dropped so far.
func (c *Chain) Dropped() []Dropped {
	out := make([]Dropped, len(c.steps))
	for i := range c.steps {
		out[i] = Dropped{c.steps[i].name, c.steps[i].dropped.Load()}
	}
	return out
}

// event applies a field transform to a change's documents.
func (f *fields) event(ev *cdc.Event) (bool, error) {
	var err error
	if ev.FullDocument, err = f.apply(ev.FullDocument); err != nil {
		return false, fmt.Errorf("document: %w", err)
	}
	if ev.PreImage, err = f.apply(ev.PreImage); err != nil {
		return false, fmt.Errorf("before-image: %w", err)
	}
	if ev.UpdateDesc != nil {
		if ev.UpdateDesc, err = f.updateDesc(ev.UpdateDesc); err != nil {
			return false, err
		}
	}
	return true, nil
}

func compileFilter(f *Filter, opts Options, fail func(string, error)) func(*cdc.Event) (bool, error) {
	for j, op := range f.Ops {
		if !slices.Contains(knownOps, cdc.Op(op)) {
			fail(fmt.Sprintf("ops[%d]", j), fmt.Errorf("%q is not an operation: one of %s", op, joinOps()))
		}
	}
	for j, p := range f.Namespaces {
		if _, err := path.Match(p, ""); err != nil {
			fail(fmt.Sprintf("namespaces[%d]", j), fmt.Errorf("%q is not a pattern: %v", p, err))
		}
	}
	var where *expr
	if f.Where != "" {
		var err error
		if where, err = compileExpr(f.Where, cel.BoolType, opts.CostLimit); err != nil {
			fail("where", err)
		}
	}
	ops := slices.Clone(f.Ops)
	nss := slices.Clone(f.Namespaces)
	return func(ev *cdc.Event) (bool, error) {
		if len(ops) > 0 && !slices.Contains(ops, string(ev.Op)) {
			return false, nil
		}
		if len(nss) > 0 && !slices.ContainsFunc(nss, func(p string) bool {
			ok, _ := path.Match(p, ev.Namespace)
			return ok
		}) {
			return false, nil
		}
		if where == nil {
			return true, nil
		}
		v, err := where.eval(ev)
		if err != nil {
			return false, &Error{"where", err}
		}
		b, ok := v.(types.Bool)
		if !ok {
			return false, fmt.Errorf("where gives %s, not a bool", v.Type().TypeName())
		}
		return bool(b), nil
	}
}

var knownOps = []cdc.Op{cdc.OpInsert, cdc.OpUpdate, cdc.OpReplace, cdc.OpDelete, cdc.OpSnapshot, cdc.OpDrop,
	cdc.OpRename, cdc.OpDropDatabase, cdc.OpInvalidate, cdc.OpCreate, cdc.OpCreateIndex, cdc.OpDropIndex, cdc.OpModify}

func joinOps() string {
	s := make([]string, len(knownOps))
	for i, o := range knownOps {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// compileSet compiles a set step. Each field's expression sees the
// document as the fields before it left it. A change without a document
// (a delete) passes unchanged.
func compileSet(list []Field, opts Options, fail func(string, error)) func(*cdc.Event) (bool, error) {
	type assign struct {
		path []string
		e    *expr
	}
	var as []assign
	for _, fl := range list {
		if fl.Path == "" || strings.Contains(fl.Path, "..") || strings.HasPrefix(fl.Path, ".") || strings.HasSuffix(fl.Path, ".") || fl.Path == "_id" || strings.HasPrefix(fl.Path, "_id.") {
			fail(fl.Path, fmt.Errorf("%q is not a field path that set may write (names joined by dots, not _id)", fl.Path))
			continue
		}
		e, err := compileExpr(fl.Value, nil, opts.CostLimit)
		if err != nil {
			fail(fl.Path, err)
			continue
		}
		as = append(as, assign{strings.Split(fl.Path, "."), e})
	}
	return func(ev *cdc.Event) (bool, error) {
		if ev.FullDocument == nil {
			return true, nil
		}
		for _, a := range as {
			v, err := a.e.eval(ev)
			if err != nil {
				return false, &Error{strings.Join(a.path, "."), err}
			}
			t, b, err := bsonValue(v)
			if err != nil {
				return false, &Error{strings.Join(a.path, "."), err}
			}
			doc, err := setPath(ev.FullDocument, a.path, t, b)
			if err != nil {
				return false, &Error{strings.Join(a.path, "."), err}
			}
			ev.FullDocument = doc
		}
		return true, nil
	}
}

// setPath returns doc with the field at path set to (t, b): replaced in
// place, or appended; missing parent documents are created, and a
// parent that is not a document is an error.
func setPath(doc []byte, path []string, t bson.Type, b []byte) ([]byte, error) {
	if len(path) == 1 && len(doc) >= 5 {
		if _, err := bson.Raw(doc).LookupErr(path[0]); err != nil {
			// A new top-level field: appended, in place when the
			// document has room (an earlier transform left some).
			out := doc[:len(doc)-1]
			if cap(doc)-len(doc) < len(path[0])+len(b)+2 {
				out = append(make([]byte, 0, len(doc)+len(path[0])+len(b)+64), out...)
			}
			out = append(appendHeader(out, bsoncore.Type(t), []byte(path[0])), b...)
			out = append(out, 0)
			binary.LittleEndian.PutUint32(out, uint32(len(out)))
			return out, nil
		}
	}
	idx, dst := bsoncore.AppendDocumentStart(make([]byte, 0, len(doc)+len(b)+len(path[0])+64))
	rem := doc[4 : len(doc)-1]
	done := false
	for len(rem) > 0 {
		el, rest, ok := bsoncore.ReadElement(rem)
		if !ok {
			return nil, errBadBSON
		}
		rem = rest
		if done || string(el.KeyBytes()) != path[0] {
			dst = append(dst, el...)
			continue
		}
		done = true
		if len(path) == 1 {
			dst = bsoncore.AppendValueElement(dst, path[0], bsoncore.Value{Type: bsoncore.Type(t), Data: b})
			continue
		}
		v := el.Value()
		if v.Type != bsoncore.TypeEmbeddedDocument {
			return nil, fmt.Errorf("field %s is a %s, not a document", path[0], bson.Type(v.Type))
		}
		sub, err := setPath(v.Data, path[1:], t, b)
		if err != nil {
			return nil, err
		}
		dst = bsoncore.AppendDocumentElement(dst, path[0], sub)
	}
	if !done {
		if len(path) == 1 {
			dst = bsoncore.AppendValueElement(dst, path[0], bsoncore.Value{Type: bsoncore.Type(t), Data: b})
		} else {
			sub, err := setPath([]byte{5, 0, 0, 0, 0}, path[1:], t, b)
			if err != nil {
				return nil, err
			}
			dst = bsoncore.AppendDocumentElement(dst, path[0], sub)
		}
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}
