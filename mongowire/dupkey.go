package mongowire

import (
	"encoding/hex"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// dupKeyMessage renders the "dup key: { ... }" part of an E11000 message
// from the error's keyValue, the way mongod prints BSON in it ({ a: { b: 1 } },
// new Date(0), /re/i, Timestamp(1, 2), UUID("..."), ...). The store's own
// rendering covers numbers, strings, ObjectIds and null; values of other
// types would otherwise reach clients as extended JSON.
func dupKeyMessage(e *mongoerr.Error) *mongoerr.Error {
	if e.Code != mongoerr.DuplicateKey {
		return e
	}
	const marker = " dup key: "
	i := strings.Index(e.Message, marker)
	if i < 0 {
		return e
	}
	var kv bson.Raw
	for _, f := range e.Info {
		if f.Key != "keyValue" {
			continue
		}
		b, err := bson.Marshal(f.Value)
		if err != nil {
			return e
		}
		kv = b
	}
	if kv == nil {
		return e
	}
	out := *e
	out.Message = e.Message[:i+len(marker)] + formatDoc(kv)
	return &out
}

func formatDoc(d bson.Raw) string {
	elems, _ := d.Elements()
	if len(elems) == 0 {
		return "{}"
	}
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Key())
		b.WriteString(": ")
		b.WriteString(formatValue(e.Value()))
	}
	b.WriteString(" }")
	return b.String()
}

func formatValue(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case bson.TypeInt64:
		return strconv.FormatInt(v.Int64(), 10)
	case bson.TypeDouble:
		f := v.Double()
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if f == float64(int64(f)) && !strings.ContainsAny(s, "e.") {
			s += ".0"
		}
		return s
	case bson.TypeDecimal128:
		return `NumberDecimal("` + v.Decimal128().String() + `")`
	case bson.TypeString, bson.TypeSymbol:
		s, _ := v.StringValueOK()
		if v.Type == bson.TypeSymbol {
			s = v.Symbol()
		}
		return `"` + escape(s) + `"`
	case bson.TypeObjectID:
		return "ObjectId('" + v.ObjectID().Hex() + "')"
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean())
	case bson.TypeNull:
		return "null"
	case bson.TypeUndefined:
		return "undefined"
	case bson.TypeMinKey:
		return "MinKey"
	case bson.TypeMaxKey:
		return "MaxKey"
	case bson.TypeDateTime:
		return "new Date(" + strconv.FormatInt(v.DateTime(), 10) + ")"
	case bson.TypeTimestamp:
		t, i := v.Timestamp()
		return "Timestamp(" + strconv.FormatUint(uint64(t), 10) + ", " + strconv.FormatUint(uint64(i), 10) + ")"
	case bson.TypeRegex:
		p, o := v.Regex()
		return "/" + p + "/" + o
	case bson.TypeBinary:
		sub, data := v.Binary()
		if sub == bson.TypeBinaryUUID && len(data) == 16 {
			h := hex.EncodeToString(data)
			return `UUID("` + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:] + `")`
		}
		return "BinData(" + strconv.Itoa(int(sub)) + ", " + strings.ToUpper(hex.EncodeToString(data)) + ")"
	case bson.TypeEmbeddedDocument:
		return formatDoc(v.Document())
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		if len(vals) == 0 {
			return "[]"
		}
		parts := make([]string, len(vals))
		for i, x := range vals {
			parts[i] = formatValue(x)
		}
		return "[ " + strings.Join(parts, ", ") + " ]"
	}
	return v.String()
}

// escape escapes a string as mongod does inside BSON's text form:
// quotes, backslashes and control characters.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteString(hex.EncodeToString([]byte{byte(r)}))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
