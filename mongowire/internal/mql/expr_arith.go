package mql

import (
	"math"
	"math/rand/v2"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Arithmetic expressions: $add, $subtract, $multiply, $divide, $mod,
// $abs, rounding ($floor, $ceil, $trunc, $round), $sqrt, $exp, $ln, $log,
// $log10, $pow and $rand.

func evalAdd(name string, args []bson.RawValue) (bson.RawValue, error) {
	acc := vInt32(0)
	var date *int64
	for _, a := range args {
		switch {
		case isNullish(a):
			return nullValue, nil
		case a.Type == bson.TypeDateTime:
			if date != nil {
				return missing, mongoerr.New(16612, "only one date allowed in an $add expression")
			}
			d := asInt64(a)
			date = &d
		case isNumeric(a.Type):
			acc = arith(opAdd, acc, a)
		default:
			return missing, mongoerr.New(16554, "$add only supports numeric or date types, not %s", typeName(a.Type))
		}
	}
	if date != nil {
		return vDate(*date + roundMillis(acc)), nil
	}
	return acc, nil
}

func roundMillis(v bson.RawValue) int64 {
	if v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64 {
		return asInt64(v)
	}
	return int64(math.RoundToEven(asFloat(v)))
}

func evalSubtract(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	switch {
	case isNullish(a) || isNullish(b):
		return nullValue, nil
	case isNumeric(a.Type) && isNumeric(b.Type):
		return arith(opSub, a, b), nil
	case a.Type == bson.TypeDateTime && b.Type == bson.TypeDateTime:
		return vInt64(asInt64(a) - asInt64(b)), nil
	case a.Type == bson.TypeDateTime && isNumeric(b.Type):
		return vDate(asInt64(a) - roundMillis(b)), nil
	}
	return missing, mongoerr.New(16556, "can't $subtract %s from %s", typeName(b.Type), typeName(a.Type))
}

func evalMultiply(_ string, args []bson.RawValue) (bson.RawValue, error) {
	acc := vInt32(1)
	for _, a := range args {
		switch {
		case isNullish(a):
			return nullValue, nil
		case isNumeric(a.Type):
			acc = arith(opMul, acc, a)
		default:
			return missing, mongoerr.New(16555, "$multiply only supports numeric types, not %s", typeName(a.Type))
		}
	}
	return acc, nil
}

func evalDivide(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nullValue, nil
	}
	if !isNumeric(a.Type) || !isNumeric(b.Type) {
		return missing, mongoerr.New(16609, "$divide only supports numeric types, not %s and %s", typeName(a.Type), typeName(b.Type))
	}
	if Compare(b, vInt32(0)) == 0 {
		return missing, mongoerr.New(mongoerr.BadValue, "can't $divide by zero")
	}
	if a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128 {
		return decimalDivide(a, b), nil
	}
	return vDouble(asFloat(a) / asFloat(b)), nil
}

func evalMod(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a, b := args[0], args[1]
	if isNullish(a) || isNullish(b) {
		return nullValue, nil
	}
	if !isNumeric(a.Type) || !isNumeric(b.Type) {
		return missing, mongoerr.New(16611, "$mod only supports numeric types, not %s and %s", typeName(a.Type), typeName(b.Type))
	}
	if Compare(b, vInt32(0)) == 0 {
		return missing, mongoerr.New(16610, "can't $mod by zero")
	}
	switch {
	case a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128:
		return vDecimal(decimalFromFloat(math.Mod(asFloat(a), asFloat(b)))), nil
	case a.Type == bson.TypeDouble || b.Type == bson.TypeDouble:
		return vDouble(math.Mod(asFloat(a), asFloat(b))), nil
	}
	x, y := asInt64(a), asInt64(b)
	r := int64(0)
	if y != -1 {
		r = x % y
	}
	if a.Type == bson.TypeInt32 && b.Type == bson.TypeInt32 {
		return vInt32(int32(r)), nil
	}
	return vInt64(r), nil
}

func evalAbs(_ string, args []bson.RawValue) (bson.RawValue, error) {
	a := args[0]
	switch a.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return nullValue, nil
	case bson.TypeInt32:
		i := asInt64(a)
		if i < 0 {
			i = -i
		}
		if i > math.MaxInt32 {
			return vInt64(i), nil
		}
		return vInt32(int32(i)), nil
	case bson.TypeInt64:
		i := asInt64(a)
		if i == math.MinInt64 {
			return missing, mongoerr.New(28680, "can't take $abs of long long min")
		}
		if i < 0 {
			i = -i
		}
		return vInt64(i), nil
	case bson.TypeDouble:
		return vDouble(math.Abs(asFloat(a))), nil
	case bson.TypeDecimal128:
		if Compare(a, vInt32(0)) < 0 {
			return arith(opMul, a, vInt32(-1)), nil
		}
		return a, nil
	}
	return missing, mongoerr.New(28765, "$abs only supports numeric types, not %s", typeName(a.Type))
}

func evalRounding(name string, args []bson.RawValue) (bson.RawValue, error) {
	v := args[0]
	switch {
	case isNullish(v):
		return nullValue, nil
	case v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64:
		return v, nil
	case v.Type == bson.TypeDouble:
		if name == "$floor" {
			return vDouble(math.Floor(asFloat(v))), nil
		}
		return vDouble(math.Ceil(asFloat(v))), nil
	case v.Type == bson.TypeDecimal128:
		f := asFloat(v)
		if name == "$floor" {
			return vDecimal(decimalFromFloat(math.Floor(f))), nil
		}
		return vDecimal(decimalFromFloat(math.Ceil(f))), nil
	}
	return missing, numericArg(name, v, 28765)
}

func evalMath(name string, args []bson.RawValue) (bson.RawValue, error) {
	for _, a := range args {
		if isNullish(a) {
			return nullValue, nil
		}
		if !isNumeric(a.Type) {
			return missing, numericArg(name, a, 28765)
		}
	}
	x := asFloat(args[0])
	var r float64
	switch name {
	case "$sqrt":
		if x < 0 {
			return missing, mongoerr.New(28714, "$sqrt's argument must be greater than or equal to 0")
		}
		r = math.Sqrt(x)
	case "$exp":
		r = math.Exp(x)
	case "$ln":
		if x <= 0 {
			return missing, mongoerr.New(28766, "$ln's argument must be a positive number, but is %s", shortString(args[0]))
		}
		r = math.Log(x)
	case "$log10":
		if x <= 0 {
			return missing, mongoerr.New(28761, "$log10's argument must be a positive number, but is %s", shortString(args[0]))
		}
		r = math.Log10(x)
	case "$log":
		b := asFloat(args[1])
		if x <= 0 {
			return missing, mongoerr.New(28758, "$log's argument must be a positive number, but is %s", shortString(args[0]))
		}
		if b <= 0 || b == 1 {
			return missing, mongoerr.New(28759, "$log's base must be a positive number not equal to 1, but is %s", shortString(args[1]))
		}
		r = math.Log(x) / math.Log(b)
	case "$pow":
		base, exp := args[0], args[1]
		if Compare(base, vInt32(0)) == 0 && Compare(exp, vInt32(0)) < 0 {
			return missing, mongoerr.New(28764, "$pow cannot take a base of 0 and a negative exponent")
		}
		isInt := func(t bson.Type) bool { return t == bson.TypeInt32 || t == bson.TypeInt64 }
		if isInt(base.Type) && isInt(exp.Type) && asInt64(exp) >= 0 {
			// Integer powers stay integers while they fit.
			res := vInt32(1)
			for i := int64(0); i < asInt64(exp); i++ {
				res = arith(opMul, res, base)
				if res.Type == bson.TypeDouble {
					return vDouble(math.Pow(asFloat(base), asFloat(exp))), nil
				}
				if i > 64 && (asInt64(base) == 0 || asInt64(base) == 1 || asInt64(base) == -1) {
					break
				}
			}
			if base.Type == bson.TypeInt64 || exp.Type == bson.TypeInt64 {
				return vInt64(asInt64(res)), nil
			}
			return res, nil
		}
		r = math.Pow(x, asFloat(exp))
	}
	if args[0].Type == bson.TypeDecimal128 {
		return vDecimal(decimalFromFloat(r)), nil
	}
	return vDouble(r), nil
}

func evalRoundPlace(name string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) < 1 || len(args) > 2 {
		return missing, mongoerr.New(28667, "Expression %s takes at least 1 argument, and at most 2, but %d were passed in.", name, len(args))
	}
	v := args[0]
	place := int64(0)
	if len(args) == 2 {
		if isNullish(args[1]) {
			return nullValue, nil
		}
		p, ok := integral(args[1])
		if !ok || p < -20 || p > 100 {
			return missing, mongoerr.New(51083, "cannot apply %s with precision value %s value must be in [-20, 100]", name, shortString(args[1]))
		}
		place = p
	}
	switch {
	case isNullish(v):
		return nullValue, nil
	case !isNumeric(v.Type):
		return missing, mongoerr.New(51081, "%s only supports numeric types, not %s", name, typeName(v.Type))
	}
	f := asFloat(v)
	scale := math.Pow10(int(place))
	var r float64
	if name == "$round" {
		r = math.RoundToEven(f*scale) / scale
	} else {
		r = math.Trunc(f*scale) / scale
	}
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		if place >= 0 {
			return v, nil
		}
		if v.Type == bson.TypeInt32 {
			return vInt32(int32(r)), nil
		}
		return vInt64(int64(r)), nil
	case bson.TypeDecimal128:
		return vDecimal(decimalFromFloat(r)), nil
	}
	return vDouble(r), nil
}

// evalRand is {$rand: {}}: a double in [0, 1).
func evalRand(_ string, args []bson.RawValue) (bson.RawValue, error) {
	if len(args) != 1 || args[0].Type != bson.TypeEmbeddedDocument || arrayLen(args[0].Value) != 0 {
		return missing, mongoerr.New(10065, "invalid parameter: expected an object ($rand)")
	}
	return vDouble(rand.Float64()), nil
}

func numericArg(name string, v bson.RawValue, code int32) error {
	return mongoerr.New(code, "%s only supports numeric types, not %s", name, typeName(v.Type))
}
