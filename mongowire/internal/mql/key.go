package mql

import (
	"encoding/binary"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// appendKey appends a byte encoding of v such that values Equal under
// Compare encode identically (1, int64(1) and 1.0 alike). It is used to
// hash group keys and set members.
func appendKey(dst []byte, v bson.RawValue) []byte {
	b := TypeBracket(v.Type)
	dst = append(dst, byte(b))
	switch b {
	case bracketMissing, bracketNull, bracketMinKey, bracketMaxKey:
		return dst
	case bracketNumber:
		return appendNumberKey(dst, v)
	case bracketString, bracketCode:
		return append(append(dst, stringBytes(v)...), 0)
	case bracketObject, bracketArray:
		it := iterDoc(v.Value)
		for {
			k, e, ok := it.next()
			if !ok {
				return append(dst, 0xff)
			}
			if b == bracketObject {
				dst = append(append(dst, k...), 0)
			}
			dst = appendKey(dst, e)
		}
	}
	return append(dst, v.Value...)
}

func appendNumberKey(dst []byte, v bson.RawValue) []byte {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return binary.LittleEndian.AppendUint64(append(dst, 'i'), uint64(asInt64(v)))
	case bson.TypeDouble:
		f := asFloat(v)
		if f == math.Trunc(f) && f >= -9.2e18 && f <= 9.2e18 {
			return binary.LittleEndian.AppendUint64(append(dst, 'i'), uint64(int64(f)))
		}
		if math.IsNaN(f) {
			return append(dst, 'n')
		}
		return binary.LittleEndian.AppendUint64(append(dst, 'f'), math.Float64bits(f+0))
	}
	// decimal128: exact as a reduced rational, or as an integer/double when it is one.
	r := toRat(v)
	switch {
	case r.nan:
		return append(dst, 'n')
	case r.inf != 0:
		return binary.LittleEndian.AppendUint64(append(dst, 'f'), math.Float64bits(math.Inf(r.inf)))
	}
	if r.r.IsInt() && r.r.Num().IsInt64() {
		return binary.LittleEndian.AppendUint64(append(dst, 'i'), uint64(r.r.Num().Int64()))
	}
	if f, exact := r.r.Float64(); exact {
		return binary.LittleEndian.AppendUint64(append(dst, 'f'), math.Float64bits(f))
	}
	return append(append(dst, 'r'), r.r.String()...)
}
