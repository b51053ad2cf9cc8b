package transform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

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
		return func(v bson.RawValue) (bson.Type, []byte, error) {
			msg, err := maskText(v, false)
			if err != nil {
				return 0, nil, err
			}
			h := hmac.New(sha256.New, key)
			h.Write(msg)
			return bson.MarshalValue(hex.EncodeToString(h.Sum(nil)))
		}, nil
	case MaskLast4:
		return func(v bson.RawValue) (bson.Type, []byte, error) {
			text, err := maskText(v, true)
			if err != nil {
				return 0, nil, err
			}
			r := []rune(string(text))
			return bson.MarshalValue(string(r[max(len(r)-4, 0):]))
		}, nil
	case MaskRedact:
		return func(bson.RawValue) (bson.Type, []byte, error) {
			return bson.MarshalValue(Redacted)
		}, nil
	}
	return nil, fmt.Errorf("%q is not a mask: use hash, last4 or redact", method)
}
