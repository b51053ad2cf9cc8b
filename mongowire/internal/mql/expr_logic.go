package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Boolean and comparison expressions: $and, $or, $not, $eq, $ne, $gt,
// $gte, $lt, $lte, $cmp.

func compileAndOr(name string, arg bson.RawValue, vars scope) (expr, error) {
	args, err := compileArgs(arg, vars)
	if err != nil {
		return nil, err
	}
	isAnd := name == "$and"
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		for _, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return missing, err
			}
			if truthy(v) != isAnd {
				return vBool(!isAnd), nil
			}
		}
		return vBool(isAnd), nil
	}}, nil
}

func evalNot(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vBool(!truthy(args[0])), nil
}

func evalCmp(name string, args []bson.RawValue) (bson.RawValue, error) {
	c := Compare(args[0], args[1])
	switch name {
	case "$eq":
		return vBool(c == 0), nil
	case "$ne":
		return vBool(c != 0), nil
	case "$gt":
		return vBool(c > 0), nil
	case "$gte":
		return vBool(c >= 0), nil
	case "$lt":
		return vBool(c < 0), nil
	case "$lte":
		return vBool(c <= 0), nil
	}
	return vInt32(int32(c)), nil
}
