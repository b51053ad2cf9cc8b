package mql

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// BindLet implements the `let` option of find, aggregate, update, delete
// and findAndModify: it evaluates each let expression once and returns v
// (a filter, an update or a pipeline, as given to the Compile functions)
// with every "$$name" and "$$name.path" reference to a let variable
// replaced by the constant it stands for. Only string values that are
// variable references change; $literal arguments are left alone. A nil or
// empty let returns v unchanged.
func BindLet(v bson.RawValue, let bson.Raw) (bson.RawValue, error) {
	if len(let) == 0 || arrayLen(let) == 0 {
		return v, nil
	}
	if err := let.Validate(); err != nil {
		return v, mongoerr.New(mongoerr.InvalidBSON, "invalid let document: %v", err)
	}
	consts := map[string]bson.RawValue{}
	now := time.Now()
	it := iterDoc(let)
	for {
		k, e, ok := it.next()
		if !ok {
			break
		}
		name := string(k)
		if !isVarName(name) || name == "" || name[0] < 'a' || name[0] > 'z' {
			return v, mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", name)
		}
		bound, err := bindLetValue(e, consts)
		if err != nil {
			return v, err
		}
		ce, err := compileExpr(bound, nil)
		if err != nil {
			return v, err
		}
		val, err := ce.eval(&evalCtx{root: emptyDoc, current: emptyDoc, now: now})
		if err != nil {
			return v, err
		}
		consts[name] = val
	}
	return bindLetValue(v, consts)
}

func bindLetValue(v bson.RawValue, consts map[string]bson.RawValue) (bson.RawValue, error) {
	switch v.Type {
	case bson.TypeString:
		s := str(v)
		if !strings.HasPrefix(s, "$$") {
			return v, nil
		}
		parts := strings.Split(s[2:], ".")
		c, ok := consts[parts[0]]
		if !ok {
			return v, nil
		}
		r := evalPath(c, parts[1:])
		if r.Type == 0 {
			return vString("$$REMOVE"), nil
		}
		d := newDoc(len(r.Value) + 16)
		d.add("$literal", r)
		return vDoc(d.done()), nil
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		d := newDoc(len(v.Value))
		it := iterDoc(v.Value)
		for {
			k, e, ok := it.next()
			if !ok {
				break
			}
			if v.Type == bson.TypeEmbeddedDocument && string(k) == "$literal" {
				d.addBytesKey(k, e)
				continue
			}
			b, err := bindLetValue(e, consts)
			if err != nil {
				return v, err
			}
			d.addBytesKey(k, b)
		}
		return bson.RawValue{Type: v.Type, Value: d.done()}, nil
	}
	return v, nil
}
