package postgres

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/encode"
)

// kind is what a typed column holds: its PostgreSQL type, and, where two
// BSON types share one (text, timestamptz), which of them it was made
// for, so that a value of the other is drift and reads back as itself.
type kind uint8

const (
	kNone      kind = iota
	kText           // string → text
	kOID            // ObjectId → text, 24 hex digits
	kInt32          // int32 → integer
	kInt64          // int64 → bigint
	kDouble         // double → double precision
	kNumeric        // decimal128, or integers and doubles after widening → numeric
	kBool           // bool → boolean
	kDate           // date → timestamptz
	kTimestamp      // timestamp → timestamptz (its seconds; the exact value is in _tide_overflow)
	kUUID           // binary subtype 4 → uuid
	kBytes          // binary subtype 0 or 2 → bytea
	kJSON           // arrays, deeper objects, everything else → jsonb (relaxed Extended JSON)
)

// pgType is the column type of k as format_type prints it.
func (k kind) pgType() string {
	switch k {
	case kText, kOID:
		return "text"
	case kInt32:
		return "integer"
	case kInt64:
		return "bigint"
	case kDouble:
		return "double precision"
	case kNumeric:
		return "numeric"
	case kBool:
		return "boolean"
	case kDate, kTimestamp:
		return "timestamp with time zone"
	case kUUID:
		return "uuid"
	case kBytes:
		return "bytea"
	}
	return "jsonb"
}

// bsonName names the BSON type a kind was made for, as tide_columns
// records it.
func (k kind) bsonName() string {
	switch k {
	case kText:
		return "string"
	case kOID:
		return "objectId"
	case kInt32:
		return "int"
	case kInt64:
		return "long"
	case kDouble:
		return "double"
	case kNumeric:
		return "decimal"
	case kBool:
		return "bool"
	case kDate:
		return "date"
	case kTimestamp:
		return "timestamp"
	case kUUID:
		return "uuid"
	case kBytes:
		return "binData"
	}
	return "json"
}

// typeName names the BSON type of a value for tide_columns and logs,
// as MongoDB's $type aliases do (uuid for binData of subtype 4).
func typeName(v bsoncore.Value) string {
	switch v.Type {
	case bsoncore.TypeBinary:
		if st, data, ok := v.BinaryOK(); ok && st == bson.TypeBinaryUUID && len(data) == 16 {
			return "uuid"
		}
	}
	if int(v.Type) < len(typeAliases) && typeAliases[v.Type] != "" {
		return typeAliases[v.Type]
	}
	switch v.Type {
	case bsoncore.TypeMinKey:
		return "minKey"
	case bsoncore.TypeMaxKey:
		return "maxKey"
	}
	return v.Type.String()
}

var typeAliases = [...]string{
	bsoncore.TypeDouble: "double", bsoncore.TypeString: "string", bsoncore.TypeEmbeddedDocument: "object",
	bsoncore.TypeArray: "array", bsoncore.TypeBinary: "binData", bsoncore.TypeUndefined: "undefined",
	bsoncore.TypeObjectID: "objectId", bsoncore.TypeBoolean: "bool", bsoncore.TypeDateTime: "date",
	bsoncore.TypeNull: "null", bsoncore.TypeRegex: "regex", bsoncore.TypeDBPointer: "dbPointer",
	bsoncore.TypeJavaScript: "javascript", bsoncore.TypeSymbol: "symbol", bsoncore.TypeCodeWithScope: "javascriptWithScope",
	bsoncore.TypeInt32: "int", bsoncore.TypeTimestamp: "timestamp", bsoncore.TypeInt64: "long", bsoncore.TypeDecimal128: "decimal",
}

// natural returns the kind of the column a value makes when its field
// first appears, or kNone for null (which makes no column).
func natural(v bsoncore.Value) kind {
	switch v.Type {
	case bsoncore.TypeString:
		return kText
	case bsoncore.TypeObjectID:
		return kOID
	case bsoncore.TypeInt32:
		return kInt32
	case bsoncore.TypeInt64:
		return kInt64
	case bsoncore.TypeDouble:
		return kDouble
	case bsoncore.TypeDecimal128:
		return kNumeric
	case bsoncore.TypeBoolean:
		return kBool
	case bsoncore.TypeDateTime:
		return kDate
	case bsoncore.TypeTimestamp:
		return kTimestamp
	case bsoncore.TypeBinary:
		st, data, _ := v.BinaryOK()
		switch {
		case st == bson.TypeBinaryUUID && len(data) == 16:
			return kUUID
		case st == bson.TypeBinaryGeneric || st == bson.TypeBinaryBinaryOld:
			return kBytes
		}
		return kJSON // the subtype would be lost in bytea
	case bsoncore.TypeNull:
		return kNone
	}
	return kJSON
}

// pin is a type from column_types, and the kind of value it takes.
type pin struct {
	kind             kind
	precision, scale int // numeric(p,s); precision 0 when unconstrained
	typ              string
}

// parsePin reads a column_types value. Only types whose values the sink
// knows how to check are accepted, so a pinned column never silently
// rounds or casts a value.
func parsePin(s string) (pin, error) {
	t := strings.ToLower(strings.Join(strings.Fields(s), " "))
	simple := map[string]kind{
		"text": kText, "integer": kInt32, "int": kInt32, "int4": kInt32, "bigint": kInt64, "int8": kInt64,
		"double precision": kDouble, "float8": kDouble, "numeric": kNumeric, "decimal": kNumeric,
		"boolean": kBool, "bool": kBool, "timestamptz": kDate, "timestamp with time zone": kDate,
		"uuid": kUUID, "bytea": kBytes, "jsonb": kJSON,
	}
	if k, ok := simple[t]; ok {
		return pin{kind: k, typ: k.pgType()}, nil
	}
	var p, sc int
	for _, prefix := range []string{"numeric(", "decimal("} {
		if rest, ok := strings.CutPrefix(t, prefix); ok {
			args, ok := strings.CutSuffix(rest, ")")
			ps := strings.Split(args, ",")
			var err error
			if ok && len(ps) >= 1 && len(ps) <= 2 {
				p, err = strconv.Atoi(strings.TrimSpace(ps[0]))
				if err == nil && len(ps) == 2 {
					sc, err = strconv.Atoi(strings.TrimSpace(ps[1]))
				}
				if err == nil && p >= 1 && p <= 1000 && sc >= 0 && sc <= p {
					return pin{kind: kNumeric, precision: p, scale: sc, typ: fmt.Sprintf("numeric(%d,%d)", p, sc)}, nil
				}
			}
			return pin{}, fmt.Errorf("%q: want numeric(precision,scale) with 1 <= precision <= 1000 and 0 <= scale <= precision", s)
		}
	}
	return pin{}, fmt.Errorf("%q is not a type the sink can pin: text, integer, bigint, double precision, numeric, numeric(p,s), boolean, timestamptz, uuid, bytea or jsonb", s)
}

// The range of timestamptz: 4713 BC to 294276 AD.
var (
	minTimestampMS = time.Date(-4712, 11, 24, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxTimestampMS = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() // exclusive
)

// maxExactDouble bounds the integers a double holds exactly.
const maxExactDouble = 1 << 53

// isNegZero reports a double -0.0, which numeric has no room for.
func isNegZero(f float64) bool { return f == 0 && math.Signbit(f) }

// decimalNegZero reports a decimal128 zero with its sign bit set.
func decimalNegZero(h, l uint64) bool {
	if h>>63 != 1 {
		return false
	}
	n, _, err := bson.NewDecimal128(h, l).BigInt()
	return err == nil && n.Sign() == 0
}

// fits reports whether v can be written to a column of kind k (pinned
// to p, if p.kind is set) without losing anything.
func fits(k kind, p *pin, v bsoncore.Value) bool {
	switch k {
	case kText:
		s, ok := v.StringValueOK()
		return ok && strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) // text holds neither
	case kOID:
		return v.Type == bsoncore.TypeObjectID
	case kInt32:
		switch v.Type {
		case bsoncore.TypeInt32:
			return true
		case bsoncore.TypeInt64:
			n := v.Int64()
			return p != nil && n >= math.MinInt32 && n <= math.MaxInt32 // a pin takes what it can hold
		}
	case kInt64:
		return v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64
	case kDouble:
		switch v.Type {
		case bsoncore.TypeDouble, bsoncore.TypeInt32:
			return true
		case bsoncore.TypeInt64:
			n := v.Int64()
			return n >= -maxExactDouble && n <= maxExactDouble
		}
	case kNumeric:
		n, ok := numericOf(v)
		if !ok {
			return false
		}
		if p != nil && p.precision > 0 {
			return fitsPrecision(n, p.precision, p.scale)
		}
		return true
	case kBool:
		return v.Type == bsoncore.TypeBoolean
	case kDate:
		ms, ok := v.DateTimeOK()
		return ok && ms >= minTimestampMS && ms < maxTimestampMS
	case kTimestamp:
		return v.Type == bsoncore.TypeTimestamp
	case kUUID:
		st, data, ok := v.BinaryOK()
		return ok && st == bson.TypeBinaryUUID && len(data) == 16
	case kBytes:
		st, _, ok := v.BinaryOK()
		return ok && (st == bson.TypeBinaryGeneric || st == bson.TypeBinaryBinaryOld)
	case kJSON:
		return v.Type != bsoncore.TypeNull // a value with NUL bytes is caught when encoded
	}
	return false
}

// widen returns the kind an unpinned column of kind k becomes to take v
// without loss, or kNone: integer → bigint → numeric, and a double or a
// decimal in an integer column makes it numeric. Never double precision,
// which would round big integers, and never text.
func widen(k kind, v bsoncore.Value) kind {
	switch k {
	case kInt32:
		if v.Type == bsoncore.TypeInt64 {
			return kInt64
		}
		fallthrough
	case kInt64:
		if v.Type == bsoncore.TypeDouble || v.Type == bsoncore.TypeDecimal128 {
			if _, ok := numericOf(v); ok {
				return kNumeric
			}
		}
	}
	return kNone
}

// numericOf converts a number to numeric, exactly; false for what numeric
// cannot hold (a negative zero) and for values that are not numbers.
func numericOf(v bsoncore.Value) (pgtype.Numeric, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		return pgtype.Numeric{Int: big.NewInt(int64(v.Int32())), Valid: true}, true
	case bsoncore.TypeInt64:
		return pgtype.Numeric{Int: big.NewInt(v.Int64()), Valid: true}, true
	case bsoncore.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return pgtype.Numeric{NaN: true, Valid: true}, true
		case math.IsInf(f, 1):
			return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, true
		case math.IsInf(f, -1):
			return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, true
		case isNegZero(f):
			return pgtype.Numeric{}, false
		}
		// The shortest decimal that reads back as f: exactly the double.
		return parseDecimal(strconv.FormatFloat(f, 'e', -1, 64))
	case bsoncore.TypeDecimal128:
		h, l := v.Decimal128()
		d := bson.NewDecimal128(h, l)
		switch {
		case d.IsNaN():
			return pgtype.Numeric{NaN: true, Valid: true}, true
		case d.IsInf() > 0:
			return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, true
		case d.IsInf() < 0:
			return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, true
		case decimalNegZero(h, l):
			return pgtype.Numeric{}, false
		}
		n, exp, err := d.BigInt()
		if err != nil {
			return pgtype.Numeric{}, false
		}
		return pgtype.Numeric{Int: n, Exp: int32(exp), Valid: true}, true
	}
	return pgtype.Numeric{}, false
}

// parseDecimal reads "d.ddde±x" as strconv's 'e' format writes it.
func parseDecimal(s string) (pgtype.Numeric, bool) {
	mant, exps, _ := strings.Cut(s, "e")
	exp, err := strconv.Atoi(exps)
	if err != nil {
		return pgtype.Numeric{}, false
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp -= len(frac)
	n, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return pgtype.Numeric{}, false
	}
	return pgtype.Numeric{Int: n, Exp: int32(exp), Valid: true}, true
}

// fitsPrecision reports whether n fits numeric(precision, scale) without
// rounding: at most scale digits after the point (trailing zeros aside)
// and at most precision-scale before it. NaN fits; infinities do not.
func fitsPrecision(n pgtype.Numeric, precision, scale int) bool {
	if n.NaN {
		return true
	}
	if n.InfinityModifier != pgtype.Finite {
		return false
	}
	digits := new(big.Int).Abs(n.Int).String()
	exp := int(n.Exp)
	for exp < 0 && len(digits) > 1 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if digits == "0" {
		return true
	}
	if exp < 0 && -exp > scale {
		return false
	}
	intDigits := len(digits) + exp // digits before the point
	return intDigits <= precision-scale
}

// value converts v, which fits k, into what pgx writes to a column of
// kind k. scratch may be appended to; what is returned may point into it.
// ok is false for a value jsonb cannot hold (NUL bytes): it overflows.
func value(k kind, v bsoncore.Value, scratch []byte) (_ any, _ []byte, ok bool) {
	switch k {
	case kText:
		s := v.Data[4 : len(v.Data)-1] // int32 length, bytes, NUL
		return s, scratch, true
	case kOID:
		id := v.ObjectID()
		at := len(scratch)
		scratch = hex.AppendEncode(scratch, id[:])
		return scratch[at:], scratch, true
	case kInt32:
		if v.Type == bsoncore.TypeInt64 {
			return int32(v.Int64()), scratch, true
		}
		return v.Int32(), scratch, true
	case kInt64:
		if v.Type == bsoncore.TypeInt32 {
			return int64(v.Int32()), scratch, true
		}
		return v.Int64(), scratch, true
	case kDouble:
		switch v.Type {
		case bsoncore.TypeInt32:
			return float64(v.Int32()), scratch, true
		case bsoncore.TypeInt64:
			return float64(v.Int64()), scratch, true
		}
		return v.Double(), scratch, true
	case kNumeric:
		n, _ := numericOf(v)
		return n, scratch, true
	case kBool:
		return v.Boolean(), scratch, true
	case kDate:
		return time.UnixMilli(v.DateTime()).UTC(), scratch, true
	case kTimestamp:
		t, _ := v.Timestamp()
		return time.Unix(int64(t), 0).UTC(), scratch, true
	case kUUID:
		_, data := v.Binary()
		return [16]byte(data), scratch, true
	case kBytes:
		_, data := v.Binary()
		return data, scratch, true
	}
	at := len(scratch)
	scratch, err := encode.AppendRelaxedValue(scratch, bson.Type(v.Type), v.Data)
	if err != nil || hasNUL(scratch[at:]) {
		return nil, scratch[:at], false
	}
	return scratch[at:], scratch, true
}

// hasNUL reports whether JSON text holds an escaped NUL (\u0000), which
// jsonb refuses.
func hasNUL(js []byte) bool {
	for i := 0; ; {
		j := bytes.Index(js[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		n := 0
		for p := j - 1; p >= 0 && js[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// appendOverflowValue appends the JSON that keeps v in _tide_overflow:
// its relaxed Extended JSON, canonical where relaxed would lose it (a
// negative zero), or, for a value holding NUL bytes, which neither text
// nor jsonb can hold, or a string that is not UTF-8, {"$tideBSON":
// base64 of the BSON document {"": v}}.
func appendOverflowValue(dst []byte, v bsoncore.Value) []byte {
	at := len(dst)
	var err error
	if v.Type == bsoncore.TypeDouble && isNegZero(v.Double()) {
		return append(dst, `{"$numberDouble":"-0.0"}`...)
	}
	if v.Type == bsoncore.TypeDecimal128 {
		if h, l := v.Decimal128(); decimalNegZero(h, l) {
			return encodeCanonical(dst, v)
		}
	}
	if s, ok := v.StringValueOK(); !ok || utf8.ValidString(s) { // JSON would replace invalid UTF-8
		dst, err = encode.AppendRelaxedValue(dst, bson.Type(v.Type), v.Data)
		if err == nil && !hasNUL(dst[at:]) {
			return dst
		}
	}
	dst = dst[:at]
	doc := bsoncore.NewDocumentBuilder().AppendValue("", v).Build()
	dst = append(dst, `{"$tideBSON":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, doc)
	return append(dst, `"}`...)
}

func encodeCanonical(dst []byte, v bsoncore.Value) []byte {
	out, err := encode.AppendCanonicalValue(dst, bson.Type(v.Type), v.Data)
	if err != nil {
		return append(dst, "null"...)
	}
	return out
}
