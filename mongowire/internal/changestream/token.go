package changestream

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// TokenType tells an event's token from a high-water mark.
type TokenType int

// Token types, as the server numbers them. A high-water mark sorts before
// every event token of the same cluster time.
const (
	HighWaterMark TokenType = 0
	EventToken    TokenType = 128
)

// TokenVersion is the token format this server writes (MongoDB 7.0's).
const TokenVersion = 2

// Codes of resume-token parse failures (the server's assertion numbers).
const (
	codeBadTokenData     int32 = 40647 // _data missing or of the wrong type
	codeBadTokenTypeBits int32 = 40648 // _typeBits of the wrong type
	codeBadTokenField    int32 = 40649 // a field other than _data and _typeBits
)

// Token is a decoded resume token: the position of one event (or of a
// point between events, for a high-water mark) in the change history.
type Token struct {
	ClusterTime    bson.Timestamp
	Version        int
	Type           TokenType
	TxnOpIndex     int
	FromInvalidate bool
	UUID           []byte   // the collection UUID; nil encodes null
	EventID        bson.Raw // the event identifier; nil for a high-water mark
	// Split marks a fragment of an event split by
	// $changeStreamSplitLargeEvent; FragmentNum is then its 0-based index.
	Split       bool
	FragmentNum int
}

// HWMToken returns the high-water-mark token of cluster time ts: resuming
// from it yields the events at ts and later.
func HWMToken(ts bson.Timestamp) Token {
	return Token{ClusterTime: ts, Version: TokenVersion, Type: HighWaterMark}
}

// KeyString returns the token's order-preserving binary form.
func (t Token) KeyString() ([]byte, error) {
	b := appendKSTimestamp(make([]byte, 0, 64+len(t.EventID)), t.ClusterTime)
	b = appendKSInt(b, int64(t.Version))
	b = appendKSInt(b, int64(t.Type))
	b = appendKSInt(b, int64(t.TxnOpIndex))
	if t.FromInvalidate {
		b = append(b, ksTrue)
	} else {
		b = append(b, ksFalse)
	}
	if t.UUID == nil {
		b = append(b, ksNull)
	} else {
		b = appendKSBinary(b, 4, t.UUID)
	}
	if t.EventID != nil {
		var err error
		if b, err = appendKSObject(append(b, ksObject), t.EventID); err != nil {
			return nil, fmt.Errorf("encode event identifier: %w", err)
		}
	}
	if t.Split {
		b = appendKSInt(b, int64(t.FragmentNum))
	}
	return append(b, ksEnd), nil
}

// Data returns the token's _data string: its KeyString in upper-case hex,
// so that tokens compare as their strings do.
func (t Token) Data() (string, error) {
	ks, err := t.KeyString()
	if err != nil {
		return "", err
	}
	return strings.ToUpper(hex.EncodeToString(ks)), nil
}

// Doc returns the token as clients see it: {_data: "<hex>"}.
func (t Token) Doc() (bson.Raw, error) {
	_, doc, err := t.encode()
	return doc, err
}

// encode returns the token's KeyString and its document form.
func (t Token) encode() ([]byte, bson.Raw, error) {
	ks, err := t.KeyString()
	if err != nil {
		return nil, nil, err
	}
	return ks, tokenDoc(ks), nil
}

// tokenDoc builds {_data: <upper-case hex of ks>} in one allocation.
func tokenDoc(ks []byte) bson.Raw {
	const hexDigits = "0123456789ABCDEF"
	n := 4 + 1 + len("_data") + 1 + 4 + 2*len(ks) + 1 + 1
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, byte(bson.TypeString))
	b = append(b, "_data"...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(2*len(ks)+1))
	for _, c := range ks {
		b = append(b, hexDigits[c>>4], hexDigits[c&0x0F])
	}
	return append(b, 0, 0)
}

// Compare orders a and b as the server orders positions in the change
// history: cluster time, token type, txnOpIndex, fromInvalidate, UUID,
// event identifier, fragment.
func Compare(a, b Token) int {
	ka, errA := a.KeyString()
	kb, errB := b.KeyString()
	if errA != nil || errB != nil {
		return strings.Compare(fmt.Sprint(errA), fmt.Sprint(errB))
	}
	return compareKS(ka, kb)
}

// DecodeKeyString decodes a token's binary form (version 1 or 2).
func DecodeKeyString(ks []byte) (Token, error) {
	r := &ksReader{b: ks}
	var t Token
	c, err := r.byte1()
	if err != nil || c != ksTimestamp {
		return Token{}, fmt.Errorf("resume token does not start with a cluster time")
	}
	tsv, err := r.value(ksTimestamp)
	if err != nil {
		return Token{}, fmt.Errorf("resume token cluster time: %w", err)
	}
	t.ClusterTime.T, t.ClusterTime.I = tsv.Timestamp()

	readInt := func(what string) (int, error) {
		c, err := r.byte1()
		if err != nil {
			return 0, fmt.Errorf("resume token %s: %w", what, err)
		}
		v, err := r.value(c)
		if err != nil {
			return 0, fmt.Errorf("resume token %s: %w", what, err)
		}
		if v.Type != bsoncore.TypeInt32 {
			return 0, fmt.Errorf("resume token %s is not a small integer", what)
		}
		return int(v.Int32()), nil
	}
	if t.Version, err = readInt("version"); err != nil {
		return Token{}, err
	}
	if t.Version != 1 && t.Version != 2 {
		return Token{}, fmt.Errorf("resume token version %d is not supported", t.Version)
	}
	typ, err := readInt("tokenType")
	if err != nil {
		return Token{}, err
	}
	t.Type = TokenType(typ)
	if t.Type != HighWaterMark && t.Type != EventToken {
		return Token{}, fmt.Errorf("resume token type %d is unknown", typ)
	}
	if t.TxnOpIndex, err = readInt("txnOpIndex"); err != nil {
		return Token{}, err
	}
	if t.TxnOpIndex < 0 {
		return Token{}, fmt.Errorf("resume token txnOpIndex %d is negative", t.TxnOpIndex)
	}
	switch c, err := r.byte1(); {
	case err != nil:
		return Token{}, fmt.Errorf("resume token fromInvalidate: %w", err)
	case c == ksTrue:
		t.FromInvalidate = true
	case c != ksFalse:
		return Token{}, fmt.Errorf("resume token fromInvalidate is not a boolean")
	}
	switch c, err := r.byte1(); {
	case err != nil:
		return Token{}, fmt.Errorf("resume token uuid: %w", err)
	case c == ksBinData:
		v, err := r.value(c)
		if err != nil {
			return Token{}, fmt.Errorf("resume token uuid: %w", err)
		}
		sub, data := v.Binary()
		if sub != 4 || len(data) != 16 {
			return Token{}, fmt.Errorf("resume token uuid is not a UUID")
		}
		t.UUID = data
	case c != ksNull:
		return Token{}, fmt.Errorf("resume token uuid is neither a UUID nor null")
	}
	if c, ok := r.peek(); ok && c == ksObject {
		r.b = r.b[1:]
		doc, err := r.object()
		if err != nil {
			return Token{}, fmt.Errorf("resume token event identifier: %w", err)
		}
		t.EventID = bson.Raw(doc)
	}
	if c, ok := r.peek(); ok && c != ksEnd {
		if t.Version < 2 {
			return Token{}, fmt.Errorf("resume token version 1 has no fragment number")
		}
		n, err := readInt("fragmentNum")
		if err != nil {
			return Token{}, err
		}
		if n < 0 {
			return Token{}, fmt.Errorf("resume token fragment number %d is negative", n)
		}
		t.Split, t.FragmentNum = true, n
	}
	if c, err := r.byte1(); err != nil || c != ksEnd {
		return Token{}, fmt.Errorf("resume token has no end marker")
	}
	if len(r.b) != 0 {
		return Token{}, fmt.Errorf("resume token has %d bytes after its end", len(r.b))
	}
	if t.Type == EventToken && t.EventID == nil {
		return Token{}, fmt.Errorf("resume token of an event has no event identifier")
	}
	return t, nil
}

// ParseToken reads a resume token as a client sends it, {_data: "<hex>"}
// with an optional _typeBits, naming the option it came from in errors.
func ParseToken(option string, v bson.RawValue) (Token, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return Token{}, mongoerr.New(mongoerr.TypeMismatch,
			"BSON field '$changeStream.%s' is the wrong type '%s', expected type 'object'", option, typeName(v.Type))
	}
	elems, err := doc.Elements()
	if err != nil {
		return Token{}, mongoerr.New(mongoerr.InvalidBSON, "%s: %v", option, err)
	}
	var data string
	var haveData bool
	for _, e := range elems {
		switch e.Key() {
		case "_data":
			s, ok := e.Value().StringValueOK()
			if !ok {
				return Token{}, mongoerr.New(codeBadTokenData, "Bad resume token: _data of missing or of wrong type. Expected string, got %s", typeName(e.Value().Type))
			}
			data, haveData = s, true
		case "_typeBits":
			if e.Value().Type != bson.TypeBinary {
				return Token{}, mongoerr.New(codeBadTokenTypeBits, "Bad resume token: _typeBits of wrong type %s", typeName(e.Value().Type))
			}
		default:
			return Token{}, mongoerr.New(codeBadTokenField, "Bad resume token: got unexpected field '%s'", e.Key())
		}
	}
	if !haveData {
		return Token{}, mongoerr.New(codeBadTokenData, "Bad resume token: _data of missing or of wrong type. Expected string, got missing")
	}
	ks, err := hex.DecodeString(data)
	if err != nil || len(data) == 0 {
		return Token{}, mongoerr.New(mongoerr.FailedToParse, "resume token string was not a valid hex string: %q", data)
	}
	t, err := DecodeKeyString(ks)
	if err != nil {
		return Token{}, mongoerr.New(mongoerr.FailedToParse, "Bad resume token: %v", err)
	}
	return t, nil
}

// sameKeyString reports whether two tokens name the same position.
func sameKeyString(a, b Token) bool {
	ka, errA := a.KeyString()
	kb, errB := b.KeyString()
	return errA == nil && errB == nil && bytes.Equal(ka, kb)
}

// typeName is MongoDB's name of a BSON type, as errors spell it.
func typeName(t bson.Type) string {
	switch t {
	case 0:
		return "missing"
	case bson.TypeDouble:
		return "double"
	case bson.TypeString:
		return "string"
	case bson.TypeEmbeddedDocument:
		return "object"
	case bson.TypeArray:
		return "array"
	case bson.TypeBinary:
		return "binData"
	case bson.TypeUndefined:
		return "undefined"
	case bson.TypeObjectID:
		return "objectId"
	case bson.TypeBoolean:
		return "bool"
	case bson.TypeDateTime:
		return "date"
	case bson.TypeNull:
		return "null"
	case bson.TypeRegex:
		return "regex"
	case bson.TypeDBPointer:
		return "dbPointer"
	case bson.TypeJavaScript:
		return "javascript"
	case bson.TypeSymbol:
		return "symbol"
	case bson.TypeCodeWithScope:
		return "javascriptWithScope"
	case bson.TypeInt32:
		return "int"
	case bson.TypeTimestamp:
		return "timestamp"
	case bson.TypeInt64:
		return "long"
	case bson.TypeDecimal128:
		return "decimal"
	case bson.TypeMinKey:
		return "minKey"
	case bson.TypeMaxKey:
		return "maxKey"
	}
	return t.String()
}
