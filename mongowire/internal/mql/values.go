package mql

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// missing is the value of a field that does not exist (Type 0).
var missing = bson.RawValue{}

var (
	nullValue  = bson.RawValue{Type: bson.TypeNull}
	trueValue  = bson.RawValue{Type: bson.TypeBoolean, Value: []byte{1}}
	falseValue = bson.RawValue{Type: bson.TypeBoolean, Value: []byte{0}}
)

func vInt32(i int32) bson.RawValue {
	return bson.RawValue{Type: bson.TypeInt32, Value: bsoncore.AppendInt32(nil, i)}
}

func vInt64(i int64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, i)}
}

func vDouble(f float64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeDouble, Value: bsoncore.AppendDouble(nil, f)}
}

func vDecimal(d bson.Decimal128) bson.RawValue {
	h, l := d.GetBytes()
	return bson.RawValue{Type: bson.TypeDecimal128, Value: bsoncore.AppendDecimal128(nil, h, l)}
}

func vString(s string) bson.RawValue {
	return bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, s)}
}

func vBool(b bool) bson.RawValue {
	if b {
		return trueValue
	}
	return falseValue
}

func vDate(ms int64) bson.RawValue {
	return bson.RawValue{Type: bson.TypeDateTime, Value: bsoncore.AppendDateTime(nil, ms)}
}

func vTime(t time.Time) bson.RawValue {
	return vDate(t.Unix()*1000 + int64(t.Nanosecond()/1e6))
}

func vTimestamp(t, i uint32) bson.RawValue {
	return bson.RawValue{Type: bson.TypeTimestamp, Value: bsoncore.AppendTimestamp(nil, t, i)}
}

func vDoc(doc []byte) bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}
}

// vArray builds an array value from vals; missing values are skipped.
func vArray(vals []bson.RawValue) bson.RawValue {
	idx, b := bsoncore.AppendArrayStart(nil)
	n := 0
	for _, v := range vals {
		if v.Type == 0 {
			continue
		}
		b = appendElem(b, strconv.Itoa(n), v)
		n++
	}
	b, _ = bsoncore.AppendArrayEnd(b, idx)
	return bson.RawValue{Type: bson.TypeArray, Value: b}
}

// appendElem appends the element key: v to a document being built.
// A key holding a NUL byte (possible only when it came from a string
// value) is cut at the NUL, so the document stays well-formed.
func appendElem(dst []byte, key string, v bson.RawValue) []byte {
	if i := strings.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	dst = append(dst, byte(v.Type))
	dst = append(dst, key...)
	dst = append(dst, 0)
	return append(dst, v.Value...)
}

// docBuilder builds a BSON document with bsoncore appenders.
type docBuilder struct {
	b   []byte
	idx int32
}

func newDoc(sizeHint int) *docBuilder {
	d := &docBuilder{b: make([]byte, 0, sizeHint+8)}
	d.idx, d.b = bsoncore.AppendDocumentStart(d.b)
	return d
}

func (d *docBuilder) add(key string, v bson.RawValue) {
	if v.Type == 0 {
		return
	}
	d.b = appendElem(d.b, key, v)
}

func (d *docBuilder) addBytesKey(key []byte, v bson.RawValue) {
	if i := bytes.IndexByte(key, 0); i >= 0 {
		key = key[:i]
	}
	d.b = append(d.b, byte(v.Type))
	d.b = append(d.b, key...)
	d.b = append(d.b, 0)
	d.b = append(d.b, v.Value...)
}

func (d *docBuilder) done() bson.Raw {
	d.b, _ = bsoncore.AppendDocumentEnd(d.b, d.idx)
	return d.b
}

// elemIter walks the elements of a BSON document or array without
// validating the whole of it first. Malformed input ends the walk.
type elemIter struct {
	rest []byte
	end  int // offset in the document where the elements end
}

func iterDoc(doc []byte) elemIter {
	if len(doc) < 5 {
		return elemIter{}
	}
	l := int(int32(binary.LittleEndian.Uint32(doc)))
	if l > len(doc) || l < 5 {
		l = len(doc)
	}
	return elemIter{rest: doc[4 : l-1], end: l - 1}
}

func (it *elemIter) next() (key []byte, v bson.RawValue, ok bool) {
	if len(it.rest) < 2 {
		return nil, missing, false
	}
	t := bson.Type(it.rest[0])
	i := bytes.IndexByte(it.rest[1:], 0)
	if i < 0 || t == 0 {
		it.rest = nil
		return nil, missing, false
	}
	key = it.rest[1 : 1+i]
	val, rem, ok := bsoncore.ReadValue(it.rest[2+i:], bsoncore.Type(t))
	if !ok {
		it.rest = nil
		return nil, missing, false
	}
	it.rest = rem
	return key, bson.RawValue{Type: t, Value: val.Data}, true
}

// lookup returns the value of field key in doc, or missing.
func lookup(doc []byte, key string) bson.RawValue {
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			return missing
		}
		if string(k) == key {
			return v
		}
	}
}

// arrayValues returns the elements of an array (or document) value.
func arrayValues(arr []byte) []bson.RawValue {
	var out []bson.RawValue
	it := iterDoc(arr)
	for {
		_, v, ok := it.next()
		if !ok {
			return out
		}
		out = append(out, v)
	}
}

// arrayLen counts the elements of an array.
func arrayLen(arr []byte) int {
	n := 0
	it := iterDoc(arr)
	for {
		if _, _, ok := it.next(); !ok {
			return n
		}
		n++
	}
}

// arrayIndex reports whether a path component is an array index.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if len(s) > 1 && s[0] == '0' {
		// "01" is a field name, not an index.
		return 0, false
	}
	return n, true
}

func isNumeric(t bson.Type) bool {
	switch t {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return true
	}
	return false
}

// stringBytes returns the bytes of a string, symbol or JavaScript value.
// Unlike RawValue.StringValue it never panics on malformed input.
func stringBytes(v bson.RawValue) []byte {
	if len(v.Value) < 5 {
		return nil
	}
	return v.Value[4 : len(v.Value)-1]
}

// str returns the string of a string, symbol or JavaScript value.
func str(v bson.RawValue) string { return string(stringBytes(v)) }

// asFloat converts a numeric value to float64.
func asFloat(v bson.RawValue) float64 {
	switch v.Type {
	case bson.TypeInt32:
		return float64(int32(binary.LittleEndian.Uint32(v.Value)))
	case bson.TypeInt64:
		return float64(int64(binary.LittleEndian.Uint64(v.Value)))
	case bson.TypeDouble:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Value))
	case bson.TypeDecimal128:
		f, _ := decimalFloat(v.Decimal128())
		return f
	}
	return 0
}

// asInt64 converts an int32 or int64 value to int64.
func asInt64(v bson.RawValue) int64 {
	switch v.Type {
	case bson.TypeInt32:
		return int64(int32(binary.LittleEndian.Uint32(v.Value)))
	case bson.TypeInt64, bson.TypeDateTime:
		return int64(binary.LittleEndian.Uint64(v.Value))
	case bson.TypeDouble:
		return int64(math.Float64frombits(binary.LittleEndian.Uint64(v.Value)))
	case bson.TypeDecimal128:
		f, _ := decimalFloat(v.Decimal128())
		return int64(f)
	}
	return 0
}

// truthy is MongoDB's truthiness of an expression value: false, null,
// undefined, missing and numeric zero are false.
func truthy(v bson.RawValue) bool {
	switch v.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return false
	case bson.TypeBoolean:
		return len(v.Value) > 0 && v.Value[0] != 0
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		return asFloat(v) != 0
	case bson.TypeDecimal128:
		return !decimalIsZero(v.Decimal128())
	}
	return true
}

// typeNames are MongoDB's $type aliases.
var typeNames = map[string]bson.Type{
	"double": bson.TypeDouble, "string": bson.TypeString, "object": bson.TypeEmbeddedDocument,
	"array": bson.TypeArray, "binData": bson.TypeBinary, "undefined": bson.TypeUndefined,
	"objectId": bson.TypeObjectID, "bool": bson.TypeBoolean, "date": bson.TypeDateTime,
	"null": bson.TypeNull, "regex": bson.TypeRegex, "dbPointer": bson.TypeDBPointer,
	"javascript": bson.TypeJavaScript, "symbol": bson.TypeSymbol,
	"javascriptWithScope": bson.TypeCodeWithScope, "int": bson.TypeInt32,
	"timestamp": bson.TypeTimestamp, "long": bson.TypeInt64, "decimal": bson.TypeDecimal128,
	"minKey": bson.TypeMinKey, "maxKey": bson.TypeMaxKey,
}

// typeName is the $type alias of t, "missing" for a missing value.
func typeName(t bson.Type) string {
	if t == 0 {
		return "missing"
	}
	for n, tt := range typeNames {
		if tt == t {
			return n
		}
	}
	return "unknown"
}

// shortString renders a value the way MongoDB error messages do, roughly.
func shortString(v bson.RawValue) string {
	switch v.Type {
	case 0:
		return "missing"
	case bson.TypeString:
		return strconv.Quote(str(v))
	case bson.TypeEmbeddedDocument:
		return docString(v.Value)
	case bson.TypeArray:
		var b bytes.Buffer
		b.WriteString("[ ")
		for i, e := range arrayValues(v.Value) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(shortString(e))
		}
		b.WriteString(" ]")
		if b.Len() == 4 {
			return "[]"
		}
		return b.String()
	case bson.TypeInt32:
		return strconv.Itoa(int(asInt64(v)))
	case bson.TypeInt64:
		return strconv.FormatInt(asInt64(v), 10)
	case bson.TypeDouble:
		return formatDouble(asFloat(v))
	case bson.TypeNull:
		return "null"
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean())
	case bson.TypeObjectID:
		return "ObjectId('" + v.ObjectID().Hex() + "')"
	case bson.TypeDateTime:
		return "new Date(" + strconv.FormatInt(asInt64(v), 10) + ")"
	case bson.TypeTimestamp:
		t, i := v.Timestamp()
		return "Timestamp(" + strconv.FormatUint(uint64(t), 10) + ", " + strconv.FormatUint(uint64(i), 10) + ")"
	case bson.TypeUndefined:
		return "undefined"
	case bson.TypeMinKey:
		return "MinKey"
	case bson.TypeMaxKey:
		return "MaxKey"
	case bson.TypeDecimal128:
		return v.Decimal128().String()
	case bson.TypeRegex:
		p, o, _ := v.RegexOK()
		return "/" + p + "/" + o
	}
	return v.String()
}

// docString renders a document as MongoDB does in error messages: { a: 1 }.
func docString(doc []byte) string {
	var b bytes.Buffer
	b.WriteString("{ ")
	it := iterDoc(doc)
	n := 0
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if n > 0 {
			b.WriteString(", ")
		}
		b.Write(k)
		b.WriteString(": ")
		b.WriteString(shortString(v))
		n++
	}
	if n == 0 {
		return "{}"
	}
	b.WriteString(" }")
	return b.String()
}

func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan.0"
	case math.IsInf(f, 1):
		return "inf.0"
	case math.IsInf(f, -1):
		return "-inf.0"
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
