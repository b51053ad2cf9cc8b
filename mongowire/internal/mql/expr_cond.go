package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Conditional expressions: $cond, $ifNull, $switch.

func compileCond(arg bson.RawValue, vars scope) (expr, error) {
	var ifE, thenE, elseE expr
	switch arg.Type {
	case bson.TypeArray:
		args, err := compileArgs(arg, vars)
		if err != nil {
			return nil, err
		}
		if len(args) != 3 {
			return nil, mongoerr.New(16020, "Expression $cond takes exactly 3 arguments. %d were passed in.", len(args))
		}
		ifE, thenE, elseE = args[0], args[1], args[2]
	case bson.TypeEmbeddedDocument:
		it := iterDoc(arg.Value)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			e, err := compileExpr(v, vars)
			if err != nil {
				return nil, err
			}
			switch string(k) {
			case "if":
				ifE = e
			case "then":
				thenE = e
			case "else":
				elseE = e
			default:
				return nil, mongoerr.New(17083, "Unrecognized parameter to $cond: %s", k)
			}
		}
		switch {
		case ifE == nil:
			return nil, mongoerr.New(17080, "Missing 'if' parameter to $cond")
		case thenE == nil:
			return nil, mongoerr.New(17081, "Missing 'then' parameter to $cond")
		case elseE == nil:
			return nil, mongoerr.New(17082, "Missing 'else' parameter to $cond")
		}
	default:
		return nil, mongoerr.New(16020, "Expression $cond takes exactly 3 arguments. 1 were passed in.")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		v, err := ifE.eval(c)
		if err != nil {
			return missing, err
		}
		if truthy(v) {
			return thenE.eval(c)
		}
		return elseE.eval(c)
	}}, nil
}

func compileIfNull(arg bson.RawValue, vars scope) (expr, error) {
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, mongoerr.New(1257300, "$ifNull needs at least two arguments, had: %d", len(args))
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for i, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return missing, err
			}
			if i == len(args)-1 || (v.Type != 0 && v.Type != bson.TypeNull && v.Type != bson.TypeUndefined) {
				return v, nil
			}
		}
		return nullValue, nil
	}}, nil
}

func compileSwitch(arg bson.RawValue, vars scope) (expr, error) {
	if arg.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(40060, "$switch requires an object as an argument, found: %s", typeName(arg.Type))
	}
	type branch struct{ cond, then expr }
	var branches []branch
	var dflt expr
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "branches":
			if v.Type != bson.TypeArray {
				return nil, mongoerr.New(40061, "$switch expected an array for 'branches', found: %s", typeName(v.Type))
			}
			for _, b := range arrayValues(v.Value) {
				if b.Type != bson.TypeEmbeddedDocument {
					return nil, mongoerr.New(40062, "$switch expected each branch to be an object, found: %s", typeName(b.Type))
				}
				var br branch
				bit := iterDoc(b.Value)
				for {
					bk, bv, ok := bit.next()
					if !ok {
						break
					}
					e, err := compileExpr(bv, vars)
					if err != nil {
						return nil, err
					}
					switch string(bk) {
					case "case":
						br.cond = e
					case "then":
						br.then = e
					default:
						return nil, mongoerr.New(40063, "$switch found an unknown argument to a branch: %s", bk)
					}
				}
				if br.cond == nil {
					return nil, mongoerr.New(40064, "$switch requires each branch have a 'case' expression")
				}
				if br.then == nil {
					return nil, mongoerr.New(40065, "$switch requires each branch have a 'then' expression.")
				}
				branches = append(branches, br)
			}
		case "default":
			e, err := compileExpr(v, vars)
			if err != nil {
				return nil, err
			}
			dflt = e
		default:
			return nil, mongoerr.New(40067, "$switch found an unknown argument: %s", k)
		}
	}
	if len(branches) == 0 {
		return nil, mongoerr.New(40068, "$switch requires at least one branch.")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for _, b := range branches {
			v, err := b.cond.eval(c)
			if err != nil {
				return missing, err
			}
			if truthy(v) {
				return b.then.eval(c)
			}
		}
		if dflt == nil {
			return missing, mongoerr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return dflt.eval(c)
	}}, nil
}
