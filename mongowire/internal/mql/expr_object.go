package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Object expressions: $mergeObjects, $objectToArray, $arrayToObject,
// $getField, $setField, $unsetField.

func evalMergeObjects(_ string, args []bson.RawValue) (bson.RawValue, error) {
	acc := &mergeAcc{}
	for _, a := range args {
		if isNullish(a) {
			continue
		}
		if a.Type != bson.TypeEmbeddedDocument {
			return missing, mongoerr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", shortString(a), typeName(a.Type))
		}
		acc.add(a)
	}
	return acc.result(), nil
}

func evalObjectToArray(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeEmbeddedDocument {
		return missing, mongoerr.New(40390, "$objectToArray requires a document input, found: %s", typeName(args[0].Type))
	}
	var out []bson.RawValue
	it := iterDoc(args[0].Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		d := newDoc(len(k) + len(v.Value) + 16)
		d.add("k", vString(string(k)))
		d.add("v", v)
		out = append(out, vDoc(d.done()))
	}
	return vArray(out), nil
}

func evalArrayToObject(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if isNullish(args[0]) {
		return nullValue, nil
	}
	if args[0].Type != bson.TypeArray {
		return missing, mongoerr.New(40386, "$arrayToObject requires an array input, found: %s", typeName(args[0].Type))
	}
	m := &mergeAcc{}
	for _, e := range arrayValues(args[0].Value) {
		var k, v bson.RawValue
		switch e.Type {
		case bson.TypeEmbeddedDocument:
			k, v = lookup(e.Value, "k"), lookup(e.Value, "v")
			if arrayLen(e.Value) != 2 || k.Type == 0 || v.Type == 0 {
				return missing, mongoerr.New(40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%d", arrayLen(e.Value))
			}
		case bson.TypeArray:
			pair := arrayValues(e.Value)
			if len(pair) != 2 {
				return missing, mongoerr.New(40397, "$arrayToObject requires an array of size 2 arrays,found array of size: %d", len(pair))
			}
			k, v = pair[0], pair[1]
		default:
			return missing, mongoerr.New(40398, "Unrecognised input type format for $arrayToObject: %s", typeName(e.Type))
		}
		if k.Type != bson.TypeString {
			return missing, mongoerr.New(40394, "$arrayToObject requires a string as the key, found: %s", typeName(k.Type))
		}
		d := newDoc(16 + len(v.Value))
		d.add(str(k), v)
		m.add(vDoc(d.done()))
	}
	return m.result(), nil
}

// compileFieldOp compiles $getField, $setField and $unsetField, which
// reach fields whose names contain dots or start with '$'.
func compileFieldOp(name string, arg bson.RawValue, vars scope) (expr, error) {
	var fieldV, inputV, valueV bson.RawValue
	if arg.Type == bson.TypeEmbeddedDocument && !isOperatorDoc(arg) {
		it := iterDoc(arg.Value)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			switch string(k) {
			case "field":
				fieldV = v
			case "input":
				inputV = v
			case "value":
				if name != "$setField" {
					return nil, mongoerr.New(4161104, "%s found an unknown argument: value", name)
				}
				valueV = v
			default:
				return nil, mongoerr.New(4161104, "%s found an unknown argument: %s", name, k)
			}
		}
	} else if name == "$getField" {
		fieldV = arg
	} else {
		return nil, mongoerr.New(4161100, "%s only supports an object as its argument", name)
	}
	// The field name must be a constant string, possibly inside $literal.
	if isOperatorDoc(fieldV) {
		if lit := lookup(fieldV.Value, "$literal"); lit.Type != 0 && arrayLen(fieldV.Value) == 1 {
			fieldV = lit
		}
	}
	if fieldV.Type != bson.TypeString {
		return nil, mongoerr.New(4161106, "%s requires 'field' to evaluate to type String, but got %s", name, typeName(fieldV.Type))
	}
	if name != "$getField" && inputV.Type == 0 {
		return nil, mongoerr.New(4161102, "%s requires 'input' to be specified", name)
	}
	if name == "$setField" && valueV.Type == 0 {
		return nil, mongoerr.New(4161103, "$setField requires 'value' to be specified")
	}
	field := str(fieldV)
	var inE, valE expr
	var err error
	if inputV.Type != 0 {
		if inE, err = compileExpr(inputV, vars); err != nil {
			return nil, err
		}
	} else {
		inE = &fieldPathExpr{variable: "CURRENT"}
	}
	if valueV.Type != 0 {
		if valE, err = compileExpr(valueV, vars); err != nil {
			return nil, err
		}
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := inE.eval(c)
		if err != nil {
			return missing, err
		}
		switch {
		case isNullish(in):
			if name == "$getField" {
				return missing, nil
			}
			return nullValue, nil
		case in.Type != bson.TypeEmbeddedDocument:
			return missing, mongoerr.New(3041705, "%s requires 'input' to evaluate to type Object", name)
		}
		if name == "$getField" {
			return lookup(in.Value, field), nil
		}
		var v bson.RawValue
		if valE != nil {
			if v, err = valE.eval(c); err != nil {
				return missing, err
			}
		}
		d := newDoc(len(in.Value) + len(v.Value) + len(field) + 8)
		it := iterDoc(in.Value)
		set := false
		for {
			k, e, ok := it.next()
			if !ok {
				break
			}
			if string(k) == field {
				if !set {
					d.add(field, v)
					set = true
				}
				continue
			}
			d.addBytesKey(k, e)
		}
		if !set {
			d.add(field, v)
		}
		return vDoc(d.done()), nil
	}}, nil
}
