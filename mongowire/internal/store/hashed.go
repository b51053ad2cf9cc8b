package store

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"math/big"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// A hashed index ({a: "hashed"}) keeps, for each document, mongod's
// 64-bit hash of the field's value (BSONElementHasher::hash64 with seed 0:
// the first 8 bytes, little-endian, of the MD5 of the seed, the value's
// canonical type and its bytes, numbers squashed to int64), so that its
// keys are the values mongod's hashed index and hashed shard keys hold.
// It serves equality and $in only.

// HashValue is mongod's hash of a value with a seed.
func HashValue(v bson.RawValue, seed int32) int64 {
	h := md5.New()
	var buf [8]byte
	binary.LittleEndian.PutUint32(buf[:4], uint32(seed))
	h.Write(buf[:4])
	hashElement(h, nil, v, false)
	sum := h.Sum(nil)
	return int64(binary.LittleEndian.Uint64(sum[:8]))
}

type writer interface{ Write([]byte) (int, error) }

// hashElement is mongod's recursiveHash: the canonical type (int32), the
// field name with its NUL when inside a document, then the value: numbers
// as an int64 (safeNumberLong), documents and arrays element by element
// ending with an EOO element, other values as their bytes.
func hashElement(h writer, name []byte, v bson.RawValue, withName bool) {
	var buf [8]byte
	binary.LittleEndian.PutUint32(buf[:4], uint32(int32(mql.TypeBracket(v.Type))))
	h.Write(buf[:4])
	if withName && v.Type != 0 { // the EOO ending a document has an empty name and no NUL of its own
		h.Write(name)
		h.Write([]byte{0})
	}
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		binary.LittleEndian.PutUint64(buf[:], uint64(safeNumberLong(v)))
		h.Write(buf[:])
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		elems, _ := bson.Raw(v.Value).Elements()
		for _, e := range elems {
			hashElement(h, []byte(e.Key()), e.Value(), true)
		}
		hashElement(h, nil, bson.RawValue{}, true) // the EOO that ends it
	default:
		h.Write(v.Value)
	}
}

// safeNumberLong converts a number to int64 as mongod's
// BSONElement::safeNumberLong does: NaN is 0, a double at or past 2^63
// clamps to the int64 bounds (2^63 itself converts to the lowest, as
// mongod has kept since SERVER-37183).
func safeNumberLong(v bson.RawValue) int64 {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32())
	case bson.TypeInt64:
		return v.Int64()
	case bson.TypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return 0
		case f == 0x1p63:
			return math.MinInt64
		case f > 0x1p63:
			return math.MaxInt64
		case f <= -0x1p63:
			return math.MinInt64
		}
		return int64(f)
	case bson.TypeDecimal128:
		d := v.Decimal128()
		if d.IsNaN() {
			return 0
		}
		if s := d.IsInf(); s != 0 {
			if s > 0 {
				return math.MaxInt64
			}
			return math.MinInt64
		}
		c, e, err := d.BigInt()
		if err != nil {
			return 0
		}
		r := new(big.Rat).SetInt(c)
		p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil))
		if e >= 0 {
			r.Mul(r, p)
		} else {
			r.Quo(r, p)
		}
		i := new(big.Int).Quo(r.Num(), r.Denom()) // towards zero
		switch {
		case i.IsInt64():
			return i.Int64()
		case i.Sign() > 0:
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return 0
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// hashKey is the key a hashed index holds for v.
func hashKey(v bson.RawValue) bson.RawValue {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(HashValue(v, 0)))
	return bson.RawValue{Type: bson.TypeInt64, Value: b[:]}
}

// hashedKeyError is mongod's refusal of an array in a hashed field.
func hashedKeyError(field string) error {
	return mongoerr.New(16766, "Error: hashed indexes do not currently support array values. Found array value at path: %s", field)
}
