package encode

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"pgregory.net/rapid"
)

// Generators of raw BSON for the property tests: documents of every BSON
// type, nested, with awkward strings and extreme numbers.

// awkwardRunes are characters that exercise the string escaper.
var awkwardRunes = []rune{
	0, 1, '\b', '\t', '\n', '\f', '\r', 0x1f, ' ', '"', '\\', '/', '<', '>', '&', 0x7f,
	0x80, 0xff, 0x2027, '\u2028', '\u2029', 0x202a, '\ufffd', '\ufeff', 0xe9, 0x4e16, 0x1f600, 0x10ffff,
}

var boundaryBytes = []byte{0, 0x1f, 0x20, 0x21, '"', 0x23, 0x5b, '\\', 0x5d, 'a', 'a', 'a', 'a', 0x7e, 0x7f, 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0xff}

// genString draws text: ordinary Unicode, awkward characters, or arbitrary
// bytes (often invalid UTF-8). NUL is allowed unless cstring is set.
func genString(cstring bool) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var s string
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 4:
			// Bytes on either side of every class the escaper tells
			// apart, in runs long enough for its eight-byte scan.
			s = string(rapid.SliceOfN(rapid.SampledFrom(boundaryBytes), 0, 70).Draw(t, "boundary"))
		case 0:
			s = rapid.String().Draw(t, "unicode")
		case 1:
			s = string(rapid.SliceOfN(rapid.SampledFrom(awkwardRunes), 0, 12).Draw(t, "awkward"))
		case 2:
			s = string(rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, "bytes"))
		default:
			s = rapid.StringMatching(`[a-zA-Z0-9_.$ -]{0,40}`).Draw(t, "ascii")
		}
		if cstring {
			s = strings.ReplaceAll(s, "\x00", "")
		}
		return s
	})
}

var specialDoubles = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 100, 1e6, 123456, 1234567, 1e15, 1e20, 1e21, 1e22, 1e-4, 1e-5, 1e-7,
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN(),
	float64(math.MaxInt64), float64(1 << 53), 3.141592653589793, -2.5e-300,
}

func genDouble() *rapid.Generator[float64] {
	return rapid.Custom(func(t *rapid.T) float64 {
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom(specialDoubles).Draw(t, "special")
		case 1:
			return math.Float64frombits(rapid.Uint64().Draw(t, "bits"))
		case 2:
			return float64(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "integral"))
		default:
			return rapid.Float64().Draw(t, "float")
		}
	})
}

// genDateTime draws milliseconds around the edges of the relaxed ISO range.
func genDateTime() *rapid.Generator[int64] {
	return rapid.Custom(func(t *rapid.T) int64 {
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			return rapid.Int64().Draw(t, "any")
		case 1:
			return rapid.Int64Range(0, maxRelaxedDate-1).Draw(t, "iso")
		case 2:
			return rapid.Int64Range(-2000, 2000).Draw(t, "epoch")
		case 3:
			return rapid.Int64Range(maxRelaxedDate-2000, maxRelaxedDate+2000).Draw(t, "year10000")
		default:
			return rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 951782400000, 951868799999, 4107542400000}).Draw(t, "special")
		}
	})
}

// genDecimal draws decimal128 words: any bits, NaN and infinities, the
// 0b11 combination form, and numbers with small significands across the
// exponent range.
func genDecimal() *rapid.Generator[[2]uint64] {
	return rapid.Custom(func(t *rapid.T) [2]uint64 {
		sign := rapid.Uint64Range(0, 1).Draw(t, "sign") << 63
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			return [2]uint64{rapid.Uint64().Draw(t, "h"), rapid.Uint64().Draw(t, "l")}
		case 1:
			return [2]uint64{sign | rapid.SampledFrom([]uint64{0x1F, 0x1E, 0x1C, 0x18}).Draw(t, "combo")<<58 | rapid.Uint64Range(0, 1<<58-1).Draw(t, "rest"), rapid.Uint64().Draw(t, "l")}
		case 2:
			exp := rapid.Uint64Range(0, 1<<14-1).Draw(t, "exp")
			return [2]uint64{sign | 3<<61 | exp<<47 | rapid.Uint64Range(0, 1<<47-1).Draw(t, "sig"), rapid.Uint64().Draw(t, "l")}
		case 3:
			exp := rapid.Uint64Range(6176-50, 6176+20).Draw(t, "exp")
			return [2]uint64{sign | exp<<49, rapid.SampledFrom([]uint64{0, 1, 5, 10, 12, 100, 1000, 123456789, 1e9, 1e18, math.MaxUint64}).Draw(t, "l")}
		default:
			exp := rapid.Uint64Range(0, 1<<14-1).Draw(t, "exp")
			return [2]uint64{sign | exp<<49 | rapid.Uint64Range(0, 1<<49-1).Draw(t, "hi"), rapid.Uint64().Draw(t, "l")}
		}
	})
}

func genOID() *rapid.Generator[[12]byte] {
	return rapid.Custom(func(t *rapid.T) (oid [12]byte) {
		copy(oid[:], rapid.SliceOfN(rapid.Byte(), 12, 12).Draw(t, "oid"))
		return oid
	})
}

var binarySubtypes = []byte{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x80, 0xff}

// appendElement appends one element of a type drawn at random.
func appendElement(t *rapid.T, dst []byte, key string, depth int) []byte {
	maxType := 20
	if depth <= 0 {
		maxType = 17 // no documents, arrays or code-with-scope
	}
	switch rapid.IntRange(0, maxType).Draw(t, "type") {
	case 0:
		return bsoncore.AppendDoubleElement(dst, key, genDouble().Draw(t, "double"))
	case 1:
		return bsoncore.AppendStringElement(dst, key, genString(false).Draw(t, "string"))
	case 2:
		sub := rapid.SampledFrom(binarySubtypes).Draw(t, "subtype")
		n := rapid.IntRange(0, 40).Draw(t, "len")
		if sub == 0x04 && rapid.Bool().Draw(t, "uuid16") {
			n = 16
		}
		return bsoncore.AppendBinaryElement(dst, key, sub, rapid.SliceOfN(rapid.Byte(), n, n).Draw(t, "data"))
	case 3:
		return bsoncore.AppendUndefinedElement(dst, key)
	case 4:
		return bsoncore.AppendObjectIDElement(dst, key, genOID().Draw(t, "oid"))
	case 5:
		return bsoncore.AppendBooleanElement(dst, key, rapid.Bool().Draw(t, "bool"))
	case 6:
		return bsoncore.AppendDateTimeElement(dst, key, genDateTime().Draw(t, "date"))
	case 7:
		return bsoncore.AppendNullElement(dst, key)
	case 8:
		opts := rapid.OneOf(rapid.StringMatching(`[imsxlu]{0,6}`), genString(true)).Draw(t, "options")
		return bsoncore.AppendRegexElement(dst, key, genString(true).Draw(t, "pattern"), opts)
	case 9:
		return bsoncore.AppendDBPointerElement(dst, key, genString(false).Draw(t, "ns"), genOID().Draw(t, "oid"))
	case 10:
		return bsoncore.AppendJavaScriptElement(dst, key, genString(false).Draw(t, "code"))
	case 11:
		return bsoncore.AppendSymbolElement(dst, key, genString(false).Draw(t, "symbol"))
	case 12:
		return bsoncore.AppendInt32Element(dst, key, rapid.OneOf(rapid.Int32(), rapid.SampledFrom([]int32{0, -1, math.MinInt32, math.MaxInt32})).Draw(t, "int32"))
	case 13:
		return bsoncore.AppendTimestampElement(dst, key, rapid.Uint32().Draw(t, "t"), rapid.Uint32().Draw(t, "i"))
	case 14:
		return bsoncore.AppendInt64Element(dst, key, rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{0, -1, math.MinInt64, math.MaxInt64})).Draw(t, "int64"))
	case 15:
		d := genDecimal().Draw(t, "decimal")
		return bsoncore.AppendDecimal128Element(dst, key, d[0], d[1])
	case 16:
		return bsoncore.AppendMaxKeyElement(dst, key)
	case 17:
		return bsoncore.AppendMinKeyElement(dst, key)
	case 18:
		return bsoncore.AppendDocumentElement(dst, key, genDocument(t, depth-1, false))
	case 19:
		return bsoncore.AppendArrayElement(dst, key, genDocument(t, depth-1, true))
	default:
		return bsoncore.AppendCodeWithScopeElement(dst, key, genString(false).Draw(t, "code"), genDocument(t, depth-1, false))
	}
}

// genDocument draws a document (or an array, whose keys are "0", "1", ...)
// nested at most depth levels below itself.
func genDocument(t *rapid.T, depth int, array bool) []byte {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	n := rapid.IntRange(0, 6).Draw(t, "elements")
	for i := range n {
		key := strconv.Itoa(i)
		if !array {
			key = genString(true).Draw(t, "key")
		}
		doc = appendElement(t, doc, key, depth)
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}
