package transform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/encode"
)

// Masks are the methods of mask_fields.
const (
	MaskHash   = "hash"   // lowercase hex HMAC-SHA256 of the value, keyed with Options.MaskKey
	MaskLast4  = "last4"  // the last four characters of the value
	MaskRedact = "redact" // the string Redacted
)

// Redacted is what mask_fields' redact leaves of a value.
const Redacted = "[redacted]"

// maskText is the text a mask works on: a string's UTF-8; the decimal
// digits of an integer (for last4); any other value's canonical
// Extended JSON.
func maskText(v bson.RawValue, digits bool) ([]byte, error) {
	switch v.Type {
	case bson.TypeString:
		return []byte(v.StringValue()), nil
	case bson.TypeInt32:
		if digits {
			return strconv.AppendInt(nil, int64(v.Int32()), 10), nil
		}
	case bson.TypeInt64:
		if digits {
			return strconv.AppendInt(nil, v.Int64(), 10), nil
		}
	}
	return encode.AppendCanonicalValue(nil, v.Type, v.Value)
}

func maskFunc(method string, key []byte) (func(bson.RawValue) (bson.Type, []byte, error), error) {
	switch method {
	case MaskHash:
		if len(key) == 0 {
			return nil, fmt.Errorf("hash needs mask_key")
		}
		macs := sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
		return func(v bson.RawValue) (bson.Type, []byte, error) {
			var msg []byte
			if v.Type == bson.TypeString {
				msg = v.Value[4 : len(v.Value)-1] // the string's bytes, as stored
			} else {
				var err error
				if msg, err = maskText(v, false); err != nil {
					return 0, nil, err
				}
			}
			h := macs.Get().(hash.Hash)
			h.Reset()
			h.Write(msg)
			var sum [sha256.Size]byte
			h.Sum(sum[:0])
			macs.Put(h)
			var text [2 * sha256.Size]byte
			hex.Encode(text[:], sum[:])
			return bson.TypeString, stringValue(text[:]), nil
		}, nil
	case MaskLast4:
		return func(v bson.RawValue) (bson.Type, []byte, error) {
			text, err := maskText(v, true)
			if err != nil {
				return 0, nil, err
			}
			r := []rune(string(text))
			return bson.TypeString, stringValue([]byte(string(r[max(len(r)-4, 0):]))), nil
		}, nil
	case MaskRedact:
		return func(bson.RawValue) (bson.Type, []byte, error) {
			return bson.TypeString, redacted, nil
		}, nil
	}
	return nil, fmt.Errorf("%q is not a mask: use hash, last4 or redact", method)
}

var redacted = stringValue([]byte(Redacted))

// stringValue is the BSON value of a string: its length with the NUL,
// its bytes, a NUL.
func stringValue(s []byte) []byte {
	b := make([]byte, 4, 4+len(s)+1)
	binary.LittleEndian.PutUint32(b, uint32(len(s)+1))
	b = append(b, s...)
	return append(b, 0)
}
