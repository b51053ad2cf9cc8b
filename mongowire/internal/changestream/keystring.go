package changestream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// This file holds the subset of MongoDB's KeyString (version 1, ascending)
// that resume tokens need: an order-preserving byte encoding of BSON values,
// so that comparing two encodings with bytes.Compare orders the values as
// MongoDB sorts them. It follows the server's layout for every type a
// document key usually holds (integers, strings, ObjectIds, documents,
// arrays, binary data, dates, timestamps, booleans, null, min/max keys).
// Non-integral doubles and decimals use our own order-preserving tail after
// the same type byte, which only this server ever reads back.

// KeyString type bytes (the server's CType).
const (
	ksMinKey      = 0x0A
	ksUndefined   = 0x0F
	ksNull        = 0x14
	ksNumeric     = 0x1E // generic type of every number inside an object
	ksNaN         = 0x1E
	ksNegLarge    = 0x1F // ≤ -2^63, including -Inf
	ksNeg8ByteInt = 0x20
	ksNeg1ByteInt = 0x27
	ksNegSmall    = 0x28 // (-1, 0)
	ksZero        = 0x29
	ksPosSmall    = 0x2A // (0, 1)
	ksPos1ByteInt = 0x2B
	ksPos8ByteInt = 0x32
	ksPosLarge    = 0x33 // ≥ 2^63, including +Inf
	ksString      = 0x3C
	ksObject      = 0x46
	ksArray       = 0x50
	ksBinData     = 0x5A
	ksOID         = 0x64
	ksFalse       = 0x6E
	ksTrue        = 0x6F
	ksDate        = 0x78
	ksTimestamp   = 0x82
	ksRegex       = 0x8C
	ksDBRef       = 0x96
	ksCode        = 0xA0
	ksCodeWScope  = 0xAA
	ksMaxKey      = 0xF0
	ksEnd         = 0x04
)

// maxKeyStringDepth bounds the nesting the decoder follows, so that a
// hostile token cannot exhaust the stack.
const maxKeyStringDepth = 150

var errKeyStringTruncated = errors.New("truncated")

// genericType is the type byte written before a field name inside an
// object: all numbers share one, so that field order compares first.
func genericType(t bson.Type) byte {
	switch t {
	case bson.TypeMinKey:
		return ksMinKey
	case bson.TypeUndefined:
		return ksUndefined
	case bson.TypeNull:
		return ksNull
	case bson.TypeDouble, bson.TypeInt32, bson.TypeInt64, bson.TypeDecimal128:
		return ksNumeric
	case bson.TypeString, bson.TypeSymbol:
		return ksString
	case bson.TypeEmbeddedDocument:
		return ksObject
	case bson.TypeArray:
		return ksArray
	case bson.TypeBinary:
		return ksBinData
	case bson.TypeObjectID:
		return ksOID
	case bson.TypeBoolean:
		return ksFalse
	case bson.TypeDateTime:
		return ksDate
	case bson.TypeTimestamp:
		return ksTimestamp
	case bson.TypeRegex:
		return ksRegex
	case bson.TypeDBPointer:
		return ksDBRef
	case bson.TypeJavaScript:
		return ksCode
	case bson.TypeCodeWithScope:
		return ksCodeWScope
	case bson.TypeMaxKey:
		return ksMaxKey
	}
	return ksUndefined
}

// appendKSValue appends the KeyString encoding of v.
func appendKSValue(dst []byte, v bson.RawValue) ([]byte, error) {
	switch v.Type {
	case bson.TypeMinKey:
		return append(dst, ksMinKey), nil
	case bson.TypeMaxKey:
		return append(dst, ksMaxKey), nil
	case bson.TypeUndefined:
		return append(dst, ksUndefined), nil
	case bson.TypeNull:
		return append(dst, ksNull), nil
	case bson.TypeInt32:
		return appendKSInt(dst, int64(v.Int32())), nil
	case bson.TypeInt64:
		return appendKSInt(dst, v.Int64()), nil
	case bson.TypeDouble:
		return appendKSDouble(dst, v.Double()), nil
	case bson.TypeDecimal128:
		d := v.Decimal128()
		f, err := decimalToFloat(d)
		if err != nil {
			return nil, err
		}
		return appendKSDouble(dst, f), nil
	case bson.TypeString:
		return appendKSString(dst, ksString, v.StringValue()), nil
	case bson.TypeSymbol:
		return appendKSString(dst, ksString, v.Symbol()), nil
	case bson.TypeJavaScript:
		return appendKSString(dst, ksCode, v.JavaScript()), nil
	case bson.TypeEmbeddedDocument:
		return appendKSObject(append(dst, ksObject), v.Document())
	case bson.TypeArray:
		dst = append(dst, ksArray)
		vals, err := v.Array().Values()
		if err != nil {
			return nil, err
		}
		for _, e := range vals {
			if dst, err = appendKSValue(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, 0), nil
	case bson.TypeBinary:
		sub, data := v.Binary()
		return appendKSBinary(dst, sub, data), nil
	case bson.TypeObjectID:
		oid := v.ObjectID()
		return append(append(dst, ksOID), oid[:]...), nil
	case bson.TypeBoolean:
		if v.Boolean() {
			return append(dst, ksTrue), nil
		}
		return append(dst, ksFalse), nil
	case bson.TypeDateTime:
		dst = append(dst, ksDate)
		return binary.BigEndian.AppendUint64(dst, uint64(v.DateTime())^(1<<63)), nil
	case bson.TypeTimestamp:
		t, i := v.Timestamp()
		return appendKSTimestamp(dst, bson.Timestamp{T: t, I: i}), nil
	case bson.TypeRegex:
		pattern, options := v.Regex()
		dst = append(dst, ksRegex)
		dst = append(append(dst, pattern...), 0)
		return append(append(dst, options...), 0), nil
	case bson.TypeDBPointer:
		ns, oid := v.DBPointer()
		dst = append(dst, ksDBRef)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ns)))
		dst = append(dst, ns...)
		return append(dst, oid[:]...), nil
	case bson.TypeCodeWithScope:
		code, scope := v.CodeWithScope()
		dst = append(dst, ksCodeWScope)
		dst = appendEscaped(dst, code)
		return appendKSObject(append(dst, 0), bson.Raw(scope))
	}
	return nil, fmt.Errorf("cannot encode BSON type %s in a resume token", v.Type)
}

// appendKSObject walks doc in place, validating each element as
// bson.Raw.Elements does, without building the slice of elements or the
// keys' strings: every event's resume token goes through here.
func appendKSObject(dst []byte, doc bson.Raw) ([]byte, error) {
	if len(doc) > 0 {
		length, rem, ok := bsoncore.ReadLength(doc)
		if !ok {
			return nil, bsoncore.NewInsufficientBytesError(doc, rem)
		}
		for length -= 4; length > 1; {
			var e bsoncore.Element
			e, rem, ok = bsoncore.ReadElement(rem)
			length -= int32(len(e))
			if !ok {
				return nil, bsoncore.NewInsufficientBytesError(doc, rem)
			}
			if err := e.Validate(); err != nil {
				return nil, err
			}
			v := e.Value()
			dst = append(dst, genericType(bson.Type(v.Type)))
			dst = append(append(dst, e.KeyBytes()...), 0)
			var err error
			if dst, err = appendKSValue(dst, bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}); err != nil {
				return nil, err
			}
		}
	}
	return append(dst, 0), nil
}

func appendKSBinary(dst []byte, sub byte, data []byte) []byte {
	dst = append(dst, ksBinData)
	if len(data) < 0xFF {
		dst = append(dst, byte(len(data)))
	} else {
		dst = append(dst, 0xFF)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	}
	dst = append(dst, sub)
	return append(dst, data...)
}

func appendKSTimestamp(dst []byte, ts bson.Timestamp) []byte {
	dst = append(dst, ksTimestamp)
	return binary.BigEndian.AppendUint64(dst, uint64(ts.T)<<32|uint64(ts.I))
}

// appendEscaped appends s with every NUL byte written as 00 FF, so that the
// terminating 00 sorts a prefix before any longer string.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = append(dst, s[i])
		if s[i] == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return dst
}

func appendKSString(dst []byte, ctype byte, s string) []byte {
	return append(appendEscaped(append(dst, ctype), s), 0)
}

// appendKSInt encodes an integer as the server does: the magnitude shifted
// left by one (the low bit flags a fractional part) in as few big-endian
// bytes as it needs, the byte count and sign folded into the type byte, and
// the bytes inverted for negative numbers.
func appendKSInt(dst []byte, n int64) []byte {
	if n == 0 {
		return append(dst, ksZero)
	}
	if n == math.MinInt64 {
		return appendKSDouble(dst, -math.Ldexp(1, 63))
	}
	neg := n < 0
	mag := uint64(n)
	if neg {
		mag = uint64(-n)
	}
	return appendShifted(dst, mag<<1, neg)
}

func appendShifted(dst []byte, shifted uint64, neg bool) []byte {
	size := (64 - bits.LeadingZeros64(shifted) + 7) / 8
	ctype := byte(ksPos1ByteInt + size - 1)
	if neg {
		ctype = byte(ksNeg1ByteInt - (size - 1))
	}
	dst = append(dst, ctype)
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], shifted)
	return appendMaybeInverted(dst, buf[8-size:], neg)
}

func appendMaybeInverted(dst, b []byte, invert bool) []byte {
	for _, c := range b {
		if invert {
			c = ^c
		}
		dst = append(dst, c)
	}
	return dst
}

// appendKSDouble encodes a double. Integral values below 2^63 take the
// integer form, exactly as the server writes them, so 1, 1L and 1.0 encode
// alike. Other values keep the server's type byte for their range, followed
// by the IEEE bits of the magnitude (or of the fractional part, after the
// integer part with its low bit set), inverted when negative.
func appendKSDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, ksNaN)
	case f == 0:
		return append(dst, ksZero)
	}
	neg := f < 0
	mag := math.Abs(f)
	var buf [8]byte
	switch {
	case mag < 1:
		ctype := byte(ksPosSmall)
		if neg {
			ctype = ksNegSmall
		}
		binary.BigEndian.PutUint64(buf[:], math.Float64bits(mag))
		return appendMaybeInverted(append(dst, ctype), buf[:], neg)
	case mag >= math.Ldexp(1, 63):
		ctype := byte(ksPosLarge)
		if neg {
			ctype = ksNegLarge
		}
		binary.BigEndian.PutUint64(buf[:], math.Float64bits(mag))
		return appendMaybeInverted(append(dst, ctype), buf[:], neg)
	}
	whole, frac := math.Modf(mag)
	if frac == 0 {
		return appendShifted(dst, uint64(whole)<<1, neg)
	}
	dst = appendShifted(dst, uint64(whole)<<1|1, neg)
	binary.BigEndian.PutUint64(buf[:], math.Float64bits(frac))
	return appendMaybeInverted(dst, buf[:], neg)
}

func decimalToFloat(d bson.Decimal128) (float64, error) {
	f, err := strconv.ParseFloat(d.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("decimal %s: %w", d, err)
	}
	return f, nil
}

// ksReader decodes KeyString bytes back into BSON values.
type ksReader struct {
	b     []byte
	depth int
}

func (r *ksReader) byte1() (byte, error) {
	if len(r.b) == 0 {
		return 0, errKeyStringTruncated
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, nil
}

func (r *ksReader) peek() (byte, bool) {
	if len(r.b) == 0 {
		return 0, false
	}
	return r.b[0], true
}

func (r *ksReader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b) < n {
		return nil, errKeyStringTruncated
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p, nil
}

// cstring reads bytes up to a terminating 00 that is not an escaped NUL
// (00 FF) when escaped is set.
func (r *ksReader) cstring(escaped bool) (string, error) {
	var out []byte
	for i := 0; i < len(r.b); i++ {
		if r.b[i] != 0 {
			continue
		}
		if escaped && i+1 < len(r.b) && r.b[i+1] == 0xFF {
			out = append(out, r.b[:i+1]...)
			r.b = r.b[i+2:]
			i = -1
			continue
		}
		out = append(out, r.b[:i]...)
		r.b = r.b[i+1:]
		return string(out), nil
	}
	return "", errKeyStringTruncated
}

// value decodes one value whose type byte ctype was already read.
func (r *ksReader) value(ctype byte) (bsoncore.Value, error) {
	switch {
	case ctype == ksMinKey:
		return bsoncore.Value{Type: bsoncore.TypeMinKey}, nil
	case ctype == ksMaxKey:
		return bsoncore.Value{Type: bsoncore.TypeMaxKey}, nil
	case ctype == ksUndefined:
		return bsoncore.Value{Type: bsoncore.TypeUndefined}, nil
	case ctype == ksNull:
		return bsoncore.Value{Type: bsoncore.TypeNull}, nil
	case ctype >= ksNaN && ctype <= ksPosLarge:
		return r.number(ctype)
	case ctype == ksString:
		s, err := r.cstring(true)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeString, Data: bsoncore.AppendString(nil, s)}, nil
	case ctype == ksCode:
		s, err := r.cstring(true)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeJavaScript, Data: bsoncore.AppendJavaScript(nil, s)}, nil
	case ctype == ksObject:
		doc, err := r.object()
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeEmbeddedDocument, Data: doc}, nil
	case ctype == ksArray:
		return r.array()
	case ctype == ksBinData:
		n, err := r.byte1()
		if err != nil {
			return bsoncore.Value{}, err
		}
		size := int(n)
		if n == 0xFF {
			p, err := r.take(4)
			if err != nil {
				return bsoncore.Value{}, err
			}
			size = int(binary.BigEndian.Uint32(p))
		}
		sub, err := r.byte1()
		if err != nil {
			return bsoncore.Value{}, err
		}
		data, err := r.take(size)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeBinary, Data: bsoncore.AppendBinary(nil, sub, data)}, nil
	case ctype == ksOID:
		p, err := r.take(12)
		if err != nil {
			return bsoncore.Value{}, err
		}
		var oid bson.ObjectID
		copy(oid[:], p)
		return bsoncore.Value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, oid)}, nil
	case ctype == ksFalse || ctype == ksTrue:
		return bsoncore.Value{Type: bsoncore.TypeBoolean, Data: bsoncore.AppendBoolean(nil, ctype == ksTrue)}, nil
	case ctype == ksDate:
		p, err := r.take(8)
		if err != nil {
			return bsoncore.Value{}, err
		}
		ms := int64(binary.BigEndian.Uint64(p) ^ (1 << 63))
		return bsoncore.Value{Type: bsoncore.TypeDateTime, Data: bsoncore.AppendDateTime(nil, ms)}, nil
	case ctype == ksTimestamp:
		p, err := r.take(8)
		if err != nil {
			return bsoncore.Value{}, err
		}
		u := binary.BigEndian.Uint64(p)
		return bsoncore.Value{Type: bsoncore.TypeTimestamp, Data: bsoncore.AppendTimestamp(nil, uint32(u>>32), uint32(u))}, nil
	case ctype == ksRegex:
		pattern, err := r.cstring(false)
		if err != nil {
			return bsoncore.Value{}, err
		}
		options, err := r.cstring(false)
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeRegex, Data: bsoncore.AppendRegex(nil, pattern, options)}, nil
	case ctype == ksDBRef:
		p, err := r.take(4)
		if err != nil {
			return bsoncore.Value{}, err
		}
		ns, err := r.take(int(binary.BigEndian.Uint32(p)))
		if err != nil {
			return bsoncore.Value{}, err
		}
		o, err := r.take(12)
		if err != nil {
			return bsoncore.Value{}, err
		}
		var oid bson.ObjectID
		copy(oid[:], o)
		return bsoncore.Value{Type: bsoncore.TypeDBPointer, Data: bsoncore.AppendDBPointer(nil, string(ns), oid)}, nil
	case ctype == ksCodeWScope:
		code, err := r.cstring(true)
		if err != nil {
			return bsoncore.Value{}, err
		}
		scope, err := r.object()
		if err != nil {
			return bsoncore.Value{}, err
		}
		return bsoncore.Value{Type: bsoncore.TypeCodeWithScope, Data: bsoncore.AppendCodeWithScope(nil, code, scope)}, nil
	}
	return bsoncore.Value{}, fmt.Errorf("unknown type byte 0x%02X", ctype)
}

func (r *ksReader) enter() error {
	r.depth++
	if r.depth > maxKeyStringDepth {
		return fmt.Errorf("nested deeper than %d levels", maxKeyStringDepth)
	}
	return nil
}

func (r *ksReader) object() (bsoncore.Document, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer func() { r.depth-- }()
	idx, doc := bsoncore.AppendDocumentStart(nil)
	for {
		gen, err := r.byte1()
		if err != nil {
			return nil, err
		}
		if gen == 0 {
			break
		}
		name, err := r.cstring(false)
		if err != nil {
			return nil, err
		}
		ctype, err := r.byte1()
		if err != nil {
			return nil, err
		}
		v, err := r.value(ctype)
		if err != nil {
			return nil, err
		}
		if genericType(bson.Type(v.Type)) != gen {
			return nil, fmt.Errorf("field %q: type byte 0x%02X does not match its value", name, gen)
		}
		doc = bsoncore.AppendValueElement(doc, name, v)
	}
	doc, err := bsoncore.AppendDocumentEnd(doc, idx)
	return doc, err
}

func (r *ksReader) array() (bsoncore.Value, error) {
	if err := r.enter(); err != nil {
		return bsoncore.Value{}, err
	}
	defer func() { r.depth-- }()
	idx, arr := bsoncore.AppendArrayStart(nil)
	for i := 0; ; i++ {
		ctype, err := r.byte1()
		if err != nil {
			return bsoncore.Value{}, err
		}
		if ctype == 0 {
			break
		}
		v, err := r.value(ctype)
		if err != nil {
			return bsoncore.Value{}, err
		}
		arr = bsoncore.AppendValueElement(arr, fmt.Sprint(i), v)
	}
	arr, err := bsoncore.AppendArrayEnd(arr, idx)
	return bsoncore.Value{Type: bsoncore.TypeArray, Data: arr}, err
}

// number decodes the numeric forms written by appendKSInt and
// appendKSDouble: integers come back as int32 when they fit, else int64;
// values with a fractional part come back as doubles.
func (r *ksReader) number(ctype byte) (bsoncore.Value, error) {
	double := func(f float64) bsoncore.Value {
		return bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, f)}
	}
	bitsOf := func(invert bool) (float64, error) {
		p, err := r.take(8)
		if err != nil {
			return 0, err
		}
		u := binary.BigEndian.Uint64(p)
		if invert {
			u = ^u
		}
		return math.Float64frombits(u), nil
	}
	switch ctype {
	case ksNaN:
		return double(math.NaN()), nil
	case ksZero:
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, 0)}, nil
	case ksPosSmall, ksPosLarge, ksNegSmall, ksNegLarge:
		neg := ctype == ksNegSmall || ctype == ksNegLarge
		f, err := bitsOf(neg)
		if err != nil {
			return bsoncore.Value{}, err
		}
		if neg {
			f = -f
		}
		return double(f), nil
	}
	neg := ctype < ksZero
	size := int(ctype) - ksPos1ByteInt + 1
	if neg {
		size = ksNeg1ByteInt - int(ctype) + 1
	}
	p, err := r.take(size)
	if err != nil {
		return bsoncore.Value{}, err
	}
	var buf [8]byte
	copy(buf[8-size:], p)
	u := binary.BigEndian.Uint64(buf[:])
	if neg {
		u = ^u & (math.MaxUint64 >> (64 - 8*size))
	}
	whole := u >> 1
	if u&1 == 1 {
		frac, err := bitsOf(neg)
		if err != nil {
			return bsoncore.Value{}, err
		}
		f := float64(whole) + frac
		if neg {
			f = -f
		}
		return double(f), nil
	}
	if whole > math.MaxInt64 {
		return bsoncore.Value{}, fmt.Errorf("integer out of range")
	}
	n := int64(whole)
	if neg {
		n = -n
	}
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return bsoncore.Value{Type: bsoncore.TypeInt32, Data: bsoncore.AppendInt32(nil, int32(n))}, nil
	}
	return bsoncore.Value{Type: bsoncore.TypeInt64, Data: bsoncore.AppendInt64(nil, n)}, nil
}

// compareKS orders two KeyString encodings.
func compareKS(a, b []byte) int { return bytes.Compare(a, b) }
