package mql

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type brackets, as MongoDB orders them (canonicalizeBSONType).
const (
	bracketMinKey    = -1
	bracketMissing   = 0 // missing and undefined
	bracketNull      = 5
	bracketNumber    = 10
	bracketString    = 15
	bracketObject    = 20
	bracketArray     = 25
	bracketBinary    = 30
	bracketObjectID  = 35
	bracketBool      = 40
	bracketDate      = 45
	bracketTimestamp = 47
	bracketRegex     = 50
	bracketDBPointer = 55
	bracketCode      = 60
	bracketCodeScope = 65
	bracketMaxKey    = 127
)

// TypeBracket returns the comparison bracket of t: values of different
// brackets never compare equal, and comparison query operators ($gt, $lt,
// ...) match only values in the bracket of their bound. All numeric types
// share one bracket, as do strings and symbols, and missing and undefined.
func TypeBracket(t bson.Type) int {
	switch t {
	case bson.TypeMinKey:
		return bracketMinKey
	case 0, bson.TypeUndefined:
		return bracketMissing
	case bson.TypeNull:
		return bracketNull
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return bracketNumber
	case bson.TypeString, bson.TypeSymbol:
		return bracketString
	case bson.TypeEmbeddedDocument:
		return bracketObject
	case bson.TypeArray:
		return bracketArray
	case bson.TypeBinary:
		return bracketBinary
	case bson.TypeObjectID:
		return bracketObjectID
	case bson.TypeBoolean:
		return bracketBool
	case bson.TypeDateTime:
		return bracketDate
	case bson.TypeTimestamp:
		return bracketTimestamp
	case bson.TypeRegex:
		return bracketRegex
	case bson.TypeDBPointer:
		return bracketDBPointer
	case bson.TypeJavaScript:
		return bracketCode
	case bson.TypeCodeWithScope:
		return bracketCodeScope
	case bson.TypeMaxKey:
		return bracketMaxKey
	}
	return bracketMaxKey + 1
}

func cmpInt[T int | int32 | int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Compare orders a and b as MongoDB sorts BSON values: first by type
// bracket (MinKey < missing/undefined < null < numbers < strings < objects
// < arrays < binData < ObjectId < bool < date < timestamp < regex <
// dbPointer < code < code with scope < MaxKey), then by value within it.
// Numbers compare by value across int32, int64, double and decimal128 (NaN
// below every other number); strings compare bytewise; documents and
// arrays element by element (type, then field name, then value).
func Compare(a, b bson.RawValue) int {
	ba, bb := TypeBracket(a.Type), TypeBracket(b.Type)
	if ba != bb {
		return cmpInt(ba, bb)
	}
	switch ba {
	case bracketNumber:
		return compareNumbers(a, b)
	case bracketString, bracketCode:
		return bytes.Compare(stringBytes(a), stringBytes(b))
	case bracketObject, bracketArray:
		return compareDocs(a.Value, b.Value)
	case bracketBinary:
		if len(a.Value) < 5 || len(b.Value) < 5 {
			return cmpInt(len(a.Value), len(b.Value))
		}
		if c := cmpInt(len(a.Value), len(b.Value)); c != 0 {
			return c
		}
		return bytes.Compare(a.Value[4:], b.Value[4:])
	case bracketObjectID:
		return bytes.Compare(a.Value, b.Value)
	case bracketBool:
		return cmpBool(len(a.Value) > 0 && a.Value[0] != 0, len(b.Value) > 0 && b.Value[0] != 0)
	case bracketDate:
		return cmpInt(asInt64(a), asInt64(b))
	case bracketTimestamp:
		if len(a.Value) < 8 || len(b.Value) < 8 {
			return cmpInt(len(a.Value), len(b.Value))
		}
		return cmpInt(binary.LittleEndian.Uint64(a.Value), binary.LittleEndian.Uint64(b.Value))
	case bracketRegex:
		pa, oa, _ := a.RegexOK()
		pb, ob, _ := b.RegexOK()
		if c := cmpString(pa, pb); c != 0 {
			return c
		}
		return cmpString(oa, ob)
	case bracketDBPointer:
		na, ida, _ := a.DBPointerOK()
		nb, idb, _ := b.DBPointerOK()
		if c := cmpInt(len(na), len(nb)); c != 0 {
			return c
		}
		if c := cmpString(na, nb); c != 0 {
			return c
		}
		return bytes.Compare(ida[:], idb[:])
	case bracketCodeScope:
		ca, sa, _ := a.CodeWithScopeOK()
		cb, sb, _ := b.CodeWithScopeOK()
		if c := cmpString(ca, cb); c != 0 {
			return c
		}
		return compareDocs(sa, sb)
	}
	return 0
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// Equal reports whether a and b are equal in MongoDB's comparison order:
// 1, int64(1) and 1.0 are equal; documents are equal when their fields,
// in order, are.
func Equal(a, b bson.RawValue) bool {
	if a.Type == b.Type && bytes.Equal(a.Value, b.Value) {
		return true
	}
	return Compare(a, b) == 0
}

func compareDocs(a, b []byte) int {
	ia, ib := iterDoc(a), iterDoc(b)
	for {
		ka, va, oka := ia.next()
		kb, vb, okb := ib.next()
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		}
		if c := cmpInt(TypeBracket(va.Type), TypeBracket(vb.Type)); c != 0 {
			return c
		}
		if c := bytes.Compare(ka, kb); c != 0 {
			return c
		}
		if c := Compare(va, vb); c != 0 {
			return c
		}
	}
}

func isNaN(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeDouble:
		return math.IsNaN(asFloat(v))
	case bson.TypeDecimal128:
		return v.Decimal128().IsNaN()
	}
	return false
}

// compareNumbers compares two numeric values exactly; NaN sorts below
// every other number and equals NaN.
func compareNumbers(a, b bson.RawValue) int {
	ta, tb := a.Type, b.Type
	isInt := func(t bson.Type) bool { return t == bson.TypeInt32 || t == bson.TypeInt64 }
	switch {
	case isInt(ta) && isInt(tb):
		return cmpInt(asInt64(a), asInt64(b))
	case ta == bson.TypeDecimal128 || tb == bson.TypeDecimal128:
		return compareRats(a, b)
	}
	na, nb := isNaN(a), isNaN(b)
	switch {
	case na && nb:
		return 0
	case na:
		return -1
	case nb:
		return 1
	}
	switch {
	case ta == bson.TypeDouble && tb == bson.TypeDouble:
		return cmpInt(asFloat(a), asFloat(b))
	case ta == bson.TypeDouble:
		return -compareIntDouble(asInt64(b), asFloat(a))
	default:
		return compareIntDouble(asInt64(a), asFloat(b))
	}
}

// compareIntDouble compares an int64 with a (non-NaN) double exactly.
func compareIntDouble(i int64, f float64) int {
	if f >= 9223372036854775808.0 {
		return -1
	}
	if f < -9223372036854775808.0 {
		return 1
	}
	t := math.Trunc(f)
	ti := int64(t)
	if c := cmpInt(i, ti); c != 0 {
		return c
	}
	return cmpInt(0, f-t)
}

// numRat is a number as an exact rational, or a special value.
type numRat struct {
	r   *big.Rat
	nan bool
	inf int
}

func toRat(v bson.RawValue) numRat {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return numRat{r: new(big.Rat).SetInt64(asInt64(v))}
	case bson.TypeDouble:
		f := asFloat(v)
		switch {
		case math.IsNaN(f):
			return numRat{nan: true}
		case math.IsInf(f, 1):
			return numRat{inf: 1}
		case math.IsInf(f, -1):
			return numRat{inf: -1}
		}
		return numRat{r: new(big.Rat).SetFloat64(f)}
	case bson.TypeDecimal128:
		d := v.Decimal128()
		if d.IsNaN() {
			return numRat{nan: true}
		}
		if s := d.IsInf(); s != 0 {
			return numRat{inf: s}
		}
		c, e, err := d.BigInt()
		if err != nil {
			return numRat{nan: true}
		}
		return numRat{r: ratPow10(c, e)}
	}
	return numRat{nan: true}
}

func ratPow10(c *big.Int, e int) *big.Rat {
	r := new(big.Rat).SetInt(c)
	if e == 0 {
		return r
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil)
	if e > 0 {
		return r.Mul(r, new(big.Rat).SetInt(p))
	}
	return r.Quo(r, new(big.Rat).SetInt(p))
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

func compareRats(a, b bson.RawValue) int {
	ra, rb := toRat(a), toRat(b)
	switch {
	case ra.nan && rb.nan:
		return 0
	case ra.nan:
		return -1
	case rb.nan:
		return 1
	case ra.inf != 0 || rb.inf != 0:
		return cmpInt(ra.inf, rb.inf)
	}
	return ra.r.Cmp(rb.r)
}
