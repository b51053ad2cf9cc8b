package mql

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func evalConvert(name string, args []bson.RawValue) (bson.RawValue, error) {
	return convertTo(strings.ToLower(strings.TrimPrefix(name, "$to")), args[0])
}

func convFail(format string, args ...any) error {
	return mongoerr.New(mongoerr.ConversionFailure, format, args...)
}

// convertTo implements $convert's conversions for the $toX shorthands.
func convertTo(target string, v bson.RawValue) (bson.RawValue, error) {
	if isNullish(v) {
		return nullValue, nil
	}
	unsupported := func() (bson.RawValue, error) {
		return missing, convFail("Unsupported conversion from %s to %s in $convert with no onError value", typeName(v.Type), target)
	}
	switch target {
	case "string":
		switch v.Type {
		case bson.TypeString:
			return v, nil
		case bson.TypeSymbol:
			return vString(string(stringBytes(v))), nil
		case bson.TypeInt32, bson.TypeInt64:
			return vString(strconv.FormatInt(asInt64(v), 10)), nil
		case bson.TypeDouble:
			return vString(formatDoubleString(asFloat(v))), nil
		case bson.TypeDecimal128:
			return vString(v.Decimal128().String()), nil
		case bson.TypeBoolean:
			return vString(strconv.FormatBool(v.Boolean())), nil
		case bson.TypeObjectID:
			id := v.ObjectID()
			return vString(hex.EncodeToString(id[:])), nil
		case bson.TypeDateTime:
			return vString(time.UnixMilli(asInt64(v)).UTC().Format("2006-01-02T15:04:05.000Z")), nil
		}
		return unsupported()
	case "int", "long":
		limit := float64(math.MaxInt32)
		if target == "long" {
			limit = 9.2233720368547758e18
		}
		var i int64
		switch v.Type {
		case bson.TypeBoolean:
			if v.Boolean() {
				i = 1
			}
		case bson.TypeInt32, bson.TypeInt64:
			i = asInt64(v)
		case bson.TypeDouble, bson.TypeDecimal128:
			f := asFloat(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return missing, convFail("Attempt to convert NaN value to integer type in $convert with no onError value")
			}
			t := math.Trunc(f)
			if t > limit || t < -limit-1 {
				return missing, convFail("Conversion would overflow target type in $convert with no onError value: %s", shortString(v))
			}
			i = int64(t)
		case bson.TypeString:
			s := str(v)
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return missing, convFail("Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", s)
			}
			i = n
		case bson.TypeDateTime:
			if target == "int" {
				return unsupported()
			}
			i = asInt64(v)
		default:
			return unsupported()
		}
		if target == "int" {
			if i > math.MaxInt32 || i < math.MinInt32 {
				return missing, convFail("Conversion would overflow target type in $convert with no onError value: %s", shortString(v))
			}
			return vInt32(int32(i)), nil
		}
		return vInt64(i), nil
	case "double":
		switch v.Type {
		case bson.TypeBoolean:
			if v.Boolean() {
				return vDouble(1), nil
			}
			return vDouble(0), nil
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
			return vDouble(asFloat(v)), nil
		case bson.TypeDateTime:
			return vDouble(float64(asInt64(v))), nil
		case bson.TypeString:
			s := str(v)
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return missing, convFail("Failed to parse number '%s' in $convert with no onError value: Did not consume whole string.", s)
			}
			return vDouble(f), nil
		}
		return unsupported()
	case "decimal":
		switch v.Type {
		case bson.TypeBoolean:
			if v.Boolean() {
				return vDecimal(decimalFromInt(1)), nil
			}
			return vDecimal(decimalFromInt(0)), nil
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDateTime:
			return vDecimal(decimalFromInt(asInt64(v))), nil
		case bson.TypeDouble:
			return vDecimal(decimalFromFloat(asFloat(v))), nil
		case bson.TypeDecimal128:
			return v, nil
		case bson.TypeString:
			d, err := bson.ParseDecimal128(str(v))
			if err != nil {
				return missing, convFail("Failed to parse number '%s' in $convert with no onError value: Failed to parse string to decimal", str(v))
			}
			return vDecimal(d), nil
		}
		return unsupported()
	case "bool":
		switch v.Type {
		case bson.TypeString, bson.TypeSymbol:
			return trueValue, nil
		}
		return vBool(truthy(v)), nil
	case "objectid":
		switch v.Type {
		case bson.TypeObjectID:
			return v, nil
		case bson.TypeString:
			id, err := bson.ObjectIDFromHex(str(v))
			if err != nil {
				return missing, convFail("Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", str(v), len(str(v)))
			}
			return bson.RawValue{Type: bson.TypeObjectID, Value: id[:]}, nil
		}
		return unsupported()
	case "date":
		switch v.Type {
		case bson.TypeDateTime:
			return v, nil
		case bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
			return vDate(asInt64(v)), nil
		case bson.TypeObjectID:
			id := v.ObjectID()
			return vTime(id.Timestamp()), nil
		case bson.TypeTimestamp:
			t, _ := v.Timestamp()
			return vDate(int64(t) * 1000), nil
		case bson.TypeString:
			t, err := time.Parse(time.RFC3339Nano, str(v))
			if err != nil {
				return missing, convFail("Error parsing date string '%s'", str(v))
			}
			return vTime(t), nil
		}
		return unsupported()
	}
	return unsupported()
}

// formatDoubleString renders a double as $toString does.
func formatDoubleString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func evalType(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vString(typeName(args[0].Type)), nil
}

func evalIsNumber(_ string, args []bson.RawValue) (bson.RawValue, error) {
	return vBool(isNumeric(args[0].Type)), nil
}

// convertTargets maps $convert's "to" type names to convertTo's targets.
var convertTargets = map[string]string{
	"double": "double", "string": "string", "objectId": "objectid", "bool": "bool",
	"date": "date", "int": "int", "long": "long", "decimal": "decimal",
}

func compileConvert(arg bson.RawValue, vars scope) (expr, error) {
	args, err := namedArgs("$convert", arg, vars, "input", "to", "onError", "onNull")
	if err != nil {
		return nil, err
	}
	if args["input"] == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'input' parameter to $convert")
	}
	if args["to"] == nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "Missing 'to' parameter to $convert")
	}
	return lazyExpr{func(c *evalCtx) (bson.RawValue, error) {
		in, err := args["input"].eval(c)
		if err != nil {
			return missing, err
		}
		to, err := args["to"].eval(c)
		if err != nil {
			return missing, err
		}
		if isNullish(in) {
			if e := args["onNull"]; e != nil {
				return e.eval(c)
			}
			return nullValue, nil
		}
		var target string
		switch {
		case isNullish(to):
			return nullValue, nil
		case to.Type == bson.TypeString:
			t, ok := convertTargets[str(to)]
			if !ok {
				return missing, mongoerr.New(mongoerr.BadValue, "Unknown type name: %s", str(to))
			}
			target = t
		case isNumeric(to.Type):
			code, _ := integral(to)
			for n, t := range convertTargets {
				if typeNames[n] == bson.Type(code) {
					target = t
				}
			}
			if target == "" {
				return missing, mongoerr.New(mongoerr.FailedToParse, "In $convert, numeric value for 'to' does not correspond to a BSON type: %s", shortString(to))
			}
		default:
			return missing, mongoerr.New(mongoerr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", typeName(to.Type))
		}
		out, err := convertTo(target, in)
		if err != nil {
			if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.ConversionFailure && args["onError"] != nil {
				return args["onError"].eval(c)
			}
			return missing, err
		}
		return out, nil
	}}, nil
}
