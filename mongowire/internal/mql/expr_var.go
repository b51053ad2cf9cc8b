package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Variables: $let.

func compileLet(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(16874, "$let only supports an object as its argument")
	}
	if err := checkParams("$let", arg.Value, 16875, "vars", "in"); err != nil {
		return nil, err
	}
	varsDoc, in := lookup(arg.Value, "vars"), lookup(arg.Value, "in")
	switch {
	case varsDoc.Type == 0:
		return nil, mongoerr.New(16876, "Missing 'vars' parameter to $let")
	case in.Type == 0:
		return nil, mongoerr.New(16877, "Missing 'in' parameter to $let")
	case varsDoc.Type != bson.TypeEmbeddedDocument:
		return nil, mongoerr.New(10065, "invalid parameter: expected an object (vars)")
	}
	var names []string
	var vals []expr
	it := iterDoc(varsDoc.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		e, err := compileExpr(v, vars)
		if err != nil {
			return nil, err
		}
		if !isVarName(string(k)) {
			return nil, mongoerr.New(16867, "'%s' starts with an invalid character for a user variable name", k)
		}
		names = append(names, string(k))
		vals = append(vals, e)
	}
	body, err := compileExpr(in, append(append(scope{}, vars...), names...))
	if err != nil {
		return nil, err
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		inner := c
		for i, n := range names {
			v, err := vals[i].eval(c)
			if err != nil {
				return missing, err
			}
			inner = inner.with(n, v)
		}
		return body.eval(inner)
	}}, nil
}

// checkParams refuses a field of an operator's argument document that is
// not one of allowed: "Unrecognized parameter to $op: name".
func checkParams(op string, doc bson.Raw, code int32, allowed ...string) error {
	it := iterDoc(doc)
	for {
		k, _, ok := it.next()
		if !ok {
			return nil
		}
		known := false
		for _, a := range allowed {
			known = known || string(k) == a
		}
		if !known {
			return mongoerr.New(code, "Unrecognized parameter to %s: %s", op, k)
		}
	}
}
