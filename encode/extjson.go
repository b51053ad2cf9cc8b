package encode

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Why not the driver: bson.MarshalExtJSON(bson.Raw(doc), ...) drives a
// reflection-based encoder through a value reader and a value writer that
// copy every string, format through fmt.Sprintf and bytes.Buffer, and
// allocate several times per value; it is about six times slower than this
// single walk over the bytes, which allocates nothing beyond dst. The output
// is byte-identical to the driver's (the tests prove it on generated
// documents of every type), so a record can be re-read by any Extended JSON
// v2 reader.

// MaxDepth is the deepest nesting of documents, arrays and code-with-scope
// scopes that the writers accept; the top-level document is depth 1. A
// deeper document is refused with an error wrapping ErrTooDeep, so that
// hostile input cannot exhaust the stack.
const MaxDepth = 200

// AppendRelaxed appends the relaxed Extended JSON v2 form of the BSON
// document doc to dst and returns the extended slice. The output is
// byte-identical to bson.MarshalExtJSON(bson.Raw(doc), false, false).
// Bytes after the document's declared length are ignored, as the driver
// ignores them. On error, dst is returned unchanged, and the error wraps
// ErrMalformed (naming the offset and the problem) or ErrTooDeep.
func AppendRelaxed(dst []byte, doc []byte) ([]byte, error) {
	return appendTop(dst, doc, false)
}

// AppendCanonical is AppendRelaxed for canonical Extended JSON v2: the
// output is byte-identical to bson.MarshalExtJSON(bson.Raw(doc), true, false).
func AppendCanonical(dst []byte, doc []byte) ([]byte, error) {
	return appendTop(dst, doc, true)
}

// AppendRelaxedValue appends the relaxed Extended JSON of a single BSON
// value of type t, such as the _id value of a document key (the Type and
// Value of a bson.RawValue). value must hold exactly one value; trailing
// bytes are an error. The output is what AppendRelaxed would write for the
// value as an element of a document.
func AppendRelaxedValue(dst []byte, t bson.Type, value []byte) ([]byte, error) {
	return appendTopValue(dst, t, value, false)
}

// AppendCanonicalValue is AppendRelaxedValue in canonical Extended JSON.
func AppendCanonicalValue(dst []byte, t bson.Type, value []byte) ([]byte, error) {
	return appendTopValue(dst, t, value, true)
}

func appendTop(dst []byte, doc []byte, canonical bool) ([]byte, error) {
	if len(doc) < 4 {
		return dst, malformed(0, "document of %d bytes is too short to hold its length", len(doc))
	}
	n := int32(binary.LittleEndian.Uint32(doc))
	if n < 5 {
		return dst, malformed(0, "document length %d is less than the minimum of 5", n)
	}
	if int(n) > len(doc) {
		return dst, malformed(0, "document length %d exceeds the %d bytes given", n, len(doc))
	}
	dst = slices.Grow(dst, 2*int(n))
	w := walker{src: doc[:n], canonical: canonical, day: -1}
	out, _, err := w.document(dst, 0, int(n), 1, false)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// appendStrict writes doc as the MongoDB Java driver's legacy strict JSON
// (JsonMode.STRICT), which Debezium's MongoDB connector uses for its
// before and after strings: relaxed Extended JSON v2 except that an int64
// is {"$numberLong":"n"}, a date {"$date":ms}, a binary
// {"$binary":"base64","$type":"hex"}, a regular expression
// {"$regex":"p","$options":"o"} and a DBPointer {"$ref":"ns","$id":{"$oid":"hex"}}.
// The driver's Extended JSON readers (Go's and Java's) read it back.
func appendStrict(dst []byte, doc []byte) ([]byte, error) {
	if len(doc) < 4 {
		return dst, malformed(0, "document of %d bytes is too short to hold its length", len(doc))
	}
	n := int32(binary.LittleEndian.Uint32(doc))
	if n < 5 {
		return dst, malformed(0, "document length %d is less than the minimum of 5", n)
	}
	if int(n) > len(doc) {
		return dst, malformed(0, "document length %d exceeds the %d bytes given", n, len(doc))
	}
	dst = slices.Grow(dst, 2*int(n))
	w := walker{src: doc[:n], strict: true, day: -1}
	out, _, err := w.document(dst, 0, int(n), 1, false)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendTopValue(dst []byte, t bson.Type, value []byte, canonical bool) ([]byte, error) {
	w := walker{src: value, canonical: canonical, day: -1}
	out, p, err := w.value(dst, byte(t), 0, len(value), 0)
	if err != nil {
		return dst, err
	}
	if p != len(value) {
		return dst, malformed(p, "%d bytes after the %s value", len(value)-p, typeName(byte(t)))
	}
	return out, nil
}

// walker writes Extended JSON for the BSON in src. Offsets are absolute in
// src, so that errors name the position in what the caller passed.
type walker struct {
	src       []byte
	canonical bool
	strict    bool // the Java driver's legacy JsonMode.STRICT; see appendStrict

	// The date part of the last relaxed date written: the dates in one
	// document tend to fall on few days.
	day     int64 // days since the epoch, or -1
	dayText [11]byte
}

// document writes the document (or array) that starts at src[pos] and must
// end by end. depth is the document's own nesting depth. It returns the
// offset just past the document.
func (w *walker) document(dst []byte, pos, end, depth int, array bool) ([]byte, int, error) {
	if depth > MaxDepth {
		return dst, pos, fmt.Errorf("%w: more than %d levels at offset %d", ErrTooDeep, MaxDepth, pos)
	}
	src := w.src
	what := "document"
	if array {
		what = "array"
	}
	if end-pos < 5 {
		return dst, pos, malformed(pos, "%s needs at least 5 bytes, %d remain", what, end-pos)
	}
	n := int32(binary.LittleEndian.Uint32(src[pos:]))
	if n < 5 || int(n) > end-pos {
		return dst, pos, malformed(pos, "%s length %d is outside 5..%d (the bytes that remain)", what, n, end-pos)
	}
	last := pos + int(n) - 1 // offset of the terminating NUL
	if src[last] != 0 {
		return dst, pos, malformed(last, "%s starting at offset %d does not end with a NUL byte", what, pos)
	}
	if array {
		dst = append(dst, '[')
	} else {
		dst = append(dst, '{')
	}
	p := pos + 4
	first := true
	for {
		t := src[p]
		if t == 0 {
			if p != last {
				return dst, pos, malformed(p, "%s starting at offset %d ends early; its length says it ends at offset %d", what, pos, last)
			}
			break
		}
		k := indexNUL(src[p+1 : last])
		if k < 0 {
			return dst, pos, malformed(p+1, "element key is not NUL-terminated within its %s", what)
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if !array {
			// Array keys are ignored, as the driver ignores them.
			dst = appendEscaped(dst, src[p+1:p+1+k])
			dst = append(dst, ':')
		}
		var err error
		dst, p, err = w.value(dst, t, p+2+k, last, depth)
		if err != nil {
			return dst, pos, err
		}
	}
	if array {
		dst = append(dst, ']')
	} else {
		dst = append(dst, '}')
	}
	return dst, last + 1, nil
}

// value writes the value of BSON type t at src[p:end] and returns the offset
// just past it. depth is the depth of the document holding the value (0 for
// a bare value).
func (w *walker) value(dst []byte, t byte, p, end, depth int) ([]byte, int, error) {
	src := w.src
	switch t {
	case 0x01: // double
		if end-p < 8 {
			return dst, p, short(p, end, t, 8)
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(src[p:]))
		return w.appendDouble(dst, f), p + 8, nil
	case 0x02: // string
		s, q, err := w.str(p, end, t)
		if err != nil {
			return dst, p, err
		}
		return appendEscaped(dst, s), q, nil
	case 0x03, 0x04: // document, array
		return w.document(dst, p, end, depth+1, t == 0x04)
	case 0x05:
		return w.binary(dst, p, end, depth)
	case 0x06:
		return append(dst, `{"$undefined":true}`...), p, nil
	case 0x07:
		if end-p < 12 {
			return dst, p, short(p, end, t, 12)
		}
		dst = append(dst, `{"$oid":"`...)
		dst = appendHex(dst, src[p:p+12])
		return append(dst, `"}`...), p + 12, nil
	case 0x08:
		if end-p < 1 {
			return dst, p, short(p, end, t, 1)
		}
		switch src[p] {
		case 0:
			return append(dst, "false"...), p + 1, nil
		case 1:
			return append(dst, "true"...), p + 1, nil
		}
		return dst, p, malformed(p, "boolean byte is 0x%02x, not 0 or 1", src[p])
	case 0x09:
		if end-p < 8 {
			return dst, p, short(p, end, t, 8)
		}
		ms := int64(binary.LittleEndian.Uint64(src[p:]))
		return w.appendDate(dst, ms), p + 8, nil
	case 0x0A:
		return append(dst, "null"...), p, nil
	case 0x0B: // regex: two C strings
		i := indexNUL(src[p:end])
		if i < 0 {
			return dst, p, malformed(p, "regular expression pattern is not NUL-terminated")
		}
		j := indexNUL(src[p+i+1 : end])
		if j < 0 {
			return dst, p, malformed(p+i+1, "regular expression options are not NUL-terminated")
		}
		if w.strict {
			dst = append(dst, `{"$regex":`...)
			dst = appendEscaped(dst, src[p:p+i])
			dst = append(dst, `,"$options":`...)
			dst = appendRegexOptions(dst, src[p+i+1:p+i+1+j])
			return append(dst, '}'), p + i + j + 2, nil
		}
		dst = append(dst, `{"$regularExpression":{"pattern":`...)
		dst = appendEscaped(dst, src[p:p+i])
		dst = append(dst, `,"options":`...)
		dst = appendRegexOptions(dst, src[p+i+1:p+i+1+j])
		return append(dst, "}}"...), p + i + j + 2, nil
	case 0x0C: // DBPointer: string, ObjectId
		ns, q, err := w.str(p, end, t)
		if err != nil {
			return dst, p, err
		}
		if end-q < 12 {
			return dst, p, short(q, end, t, 12)
		}
		// The driver writes the namespace without escaping it; so do we,
		// to stay byte-identical (DBPointer is deprecated and rare).
		if w.strict {
			dst = append(dst, `{"$ref":`...)
			dst = appendEscaped(dst, ns)
			dst = append(dst, `,"$id":{"$oid":"`...)
			dst = appendHex(dst, src[q:q+12])
			return append(dst, `"}}`...), q + 12, nil
		}
		dst = append(dst, `{"$dbPointer":{"$ref":"`...)
		dst = append(dst, ns...)
		dst = append(dst, `","$id":{"$oid":"`...)
		dst = appendHex(dst, src[q:q+12])
		return append(dst, `"}}}`...), q + 12, nil
	case 0x0D:
		s, q, err := w.str(p, end, t)
		if err != nil {
			return dst, p, err
		}
		dst = append(dst, `{"$code":`...)
		dst = appendEscaped(dst, s)
		return append(dst, '}'), q, nil
	case 0x0E:
		s, q, err := w.str(p, end, t)
		if err != nil {
			return dst, p, err
		}
		dst = append(dst, `{"$symbol":`...)
		dst = appendEscaped(dst, s)
		return append(dst, '}'), q, nil
	case 0x0F:
		return w.codeWithScope(dst, p, end, depth)
	case 0x10:
		if end-p < 4 {
			return dst, p, short(p, end, t, 4)
		}
		i := int64(int32(binary.LittleEndian.Uint32(src[p:])))
		if w.canonical {
			dst = append(dst, `{"$numberInt":"`...)
			dst = strconv.AppendInt(dst, i, 10)
			return append(dst, `"}`...), p + 4, nil
		}
		return strconv.AppendInt(dst, i, 10), p + 4, nil
	case 0x11: // timestamp: increment, then seconds
		if end-p < 8 {
			return dst, p, short(p, end, t, 8)
		}
		dst = append(dst, `{"$timestamp":{"t":`...)
		dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(src[p+4:])), 10)
		dst = append(dst, `,"i":`...)
		dst = strconv.AppendUint(dst, uint64(binary.LittleEndian.Uint32(src[p:])), 10)
		return append(dst, "}}"...), p + 8, nil
	case 0x12:
		if end-p < 8 {
			return dst, p, short(p, end, t, 8)
		}
		i := int64(binary.LittleEndian.Uint64(src[p:]))
		if w.canonical || w.strict {
			dst = append(dst, `{"$numberLong":"`...)
			dst = strconv.AppendInt(dst, i, 10)
			return append(dst, `"}`...), p + 8, nil
		}
		return strconv.AppendInt(dst, i, 10), p + 8, nil
	case 0x13:
		if end-p < 16 {
			return dst, p, short(p, end, t, 16)
		}
		dst = append(dst, `{"$numberDecimal":"`...)
		dst = appendDecimal128(dst, binary.LittleEndian.Uint64(src[p+8:]), binary.LittleEndian.Uint64(src[p:]))
		return append(dst, `"}`...), p + 16, nil
	case 0x7F:
		return append(dst, `{"$maxKey":1}`...), p, nil
	case 0xFF:
		return append(dst, `{"$minKey":1}`...), p, nil
	}
	return dst, p, malformed(p, "unknown BSON type 0x%02x", t)
}

// str reads a BSON string (int32 length including the NUL, bytes, NUL) at
// src[p:end] and returns its bytes without the NUL and the offset past it.
func (w *walker) str(p, end int, t byte) ([]byte, int, error) {
	if end-p < 4 {
		return nil, p, short(p, end, t, 4)
	}
	n := int32(binary.LittleEndian.Uint32(w.src[p:]))
	if n <= 0 {
		return nil, p, malformed(p, "%s length %d is not positive", typeName(t), n)
	}
	if int(n) > end-p-4 {
		return nil, p, malformed(p, "%s length %d runs past the %d bytes that remain", typeName(t), n, end-p-4)
	}
	q := p + 4 + int(n)
	if w.src[q-1] != 0 {
		return nil, p, malformed(q-1, "%s is not NUL-terminated", typeName(t))
	}
	return w.src[p+4 : q-1], q, nil
}

// binary writes a BSON binary value at src[p:end].
func (w *walker) binary(dst []byte, p, end, depth int) ([]byte, int, error) {
	src := w.src
	if end-p < 5 {
		return dst, p, short(p, end, 0x05, 5)
	}
	n := int32(binary.LittleEndian.Uint32(src[p:]))
	subtype := src[p+4]
	if n < 0 {
		return dst, p, malformed(p, "binary length %d is negative", n)
	}
	data, next := p+5, p+5+int(n)
	if subtype == 0x02 && n > 4 {
		// The old binary subtype repeats the length inside the data. The
		// driver trusts the inner length: in a top-level element the
		// outer length bounds the value, deeper down the inner one alone
		// says where the next element starts. Do the same.
		if end-p < 9 {
			return dst, p, short(p, end, 0x05, 9)
		}
		inner := int32(binary.LittleEndian.Uint32(src[p+5:]))
		if inner < 0 {
			return dst, p, malformed(p+5, "old binary inner length %d is negative", inner)
		}
		data = p + 9
		if depth <= 1 {
			if int(n) > end-p-5 {
				return dst, p, malformed(p, "binary length %d runs past the %d bytes that remain", n, end-p-5)
			}
			if inner > n-4 {
				return dst, p, malformed(p+5, "old binary inner length %d exceeds its outer length %d less 4", inner, n)
			}
			n = inner
		} else {
			if int(inner) > end-data {
				return dst, p, malformed(p+5, "old binary inner length %d runs past the %d bytes that remain", inner, end-data)
			}
			n = inner
			next = data + int(n)
		}
	} else if int(n) > end-p-5 {
		return dst, p, malformed(p, "binary length %d runs past the %d bytes that remain", n, end-p-5)
	}
	if w.strict {
		dst = append(dst, `{"$binary":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, src[data:data+int(n)])
		dst = append(dst, `","$type":"`...)
		dst = append(dst, hexDigits[subtype>>4], hexDigits[subtype&0xF])
		return append(dst, `"}`...), next, nil
	}
	dst = append(dst, `{"$binary":{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, src[data:data+int(n)])
	dst = append(dst, `","subType":"`...)
	dst = append(dst, hexDigits[subtype>>4], hexDigits[subtype&0xF])
	return append(dst, `"}}`...), next, nil
}

// codeWithScope writes a BSON code-with-scope value at src[p:end]: int32
// total length, string, document.
func (w *walker) codeWithScope(dst []byte, p, end, depth int) ([]byte, int, error) {
	src := w.src
	if end-p < 8 {
		return dst, p, short(p, end, 0x0F, 8)
	}
	total := int64(int32(binary.LittleEndian.Uint32(src[p:])))
	n := int32(binary.LittleEndian.Uint32(src[p+4:]))
	if n <= 0 {
		return dst, p, malformed(p+4, "code-with-scope code length %d is not positive", n)
	}
	if int(n) > end-p-8 {
		return dst, p, malformed(p+4, "code-with-scope code length %d runs past the %d bytes that remain", n, end-p-8)
	}
	scope := p + 8 + int(n)
	if end-scope < 4 {
		return dst, p, short(scope, end, 0x0F, 4)
	}
	size := int64(int32(binary.LittleEndian.Uint32(src[scope:])))
	if total != 8+int64(n)+size {
		return dst, p, malformed(p, "code-with-scope length %d does not match its parts (8 + code %d + scope %d)", total, n, size)
	}
	dst = append(dst, `{"$code":`...)
	// The driver drops the code string's last byte without checking that
	// it is the NUL; so do we.
	dst = appendEscaped(dst, src[p+8:scope-1])
	dst = append(dst, `,"$scope":`...)
	dst, q, err := w.document(dst, scope, end, depth+1, false)
	if err != nil {
		return dst, p, err
	}
	return append(dst, '}'), q, nil
}

func (w *walker) appendDouble(dst []byte, f float64) []byte {
	if w.canonical {
		dst = append(dst, `{"$numberDouble":"`...)
		dst = appendDoubleText(dst, f)
		return append(dst, `"}`...)
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		dst = append(dst, `{"$numberDouble":"`...)
		dst = appendDoubleText(dst, f)
		return append(dst, `"}`...)
	}
	return appendDoubleText(dst, f)
}

// appendDoubleText formats f as the driver does: Infinity, -Infinity, NaN,
// or the shortest %G form, with ".0" added when that has neither a point
// nor an exponent.
func appendDoubleText(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	if out, ok := appendShortDecimal(dst, f); ok {
		return out
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'G', -1, 64)
	for _, c := range dst[start:] {
		if c == '.' || c == 'E' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5}

// appendShortDecimal is the fast path of appendDoubleText for the doubles
// that fill real documents: integers, and numbers with at most five
// decimals (prices, coordinates), between 1e-4 and 1e6 where %G writes
// plain notation. It finds the fewest decimals k for which n/10^k, n an
// integer, rounds to f. That decimal is the shortest that reads back as f
// (at each k at most one candidate is close enough, and fewer decimals
// means fewer digits), so it is what strconv writes. Other doubles go to
// strconv.
func appendShortDecimal(dst []byte, f float64) ([]byte, bool) {
	a := math.Abs(f)
	if !(a < 1e6) || (a < 1e-4 && a != 0) {
		return dst, false
	}
	if math.Signbit(f) {
		dst = append(dst, '-')
	}
	if a == math.Trunc(a) {
		dst = strconv.AppendUint(dst, uint64(a), 10)
		return append(dst, '.', '0'), true
	}
	for k := 1; k < len(pow10); k++ {
		n := math.Round(a * pow10[k])
		if n/pow10[k] != a {
			continue
		}
		u, p := uint64(n), uint64(pow10[k])
		dst = strconv.AppendUint(dst, u/p, 10)
		dst = append(dst, '.')
		frac := u % p
		for q := p / 10; q > frac && q > 1; q /= 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendUint(dst, frac, 10), true
	}
	if math.Signbit(f) {
		dst = dst[:len(dst)-1]
	}
	return dst, false
}

// maxRelaxedDate is the first millisecond of year 10000. The driver writes
// dates from 1970 up to it as ISO-8601 text in relaxed mode.
const maxRelaxedDate = 253402300800000

func (w *walker) appendDate(dst []byte, ms int64) []byte {
	if w.strict {
		dst = append(dst, `{"$date":`...)
		dst = strconv.AppendInt(dst, ms, 10)
		return append(dst, '}')
	}
	if w.canonical || ms < 0 || ms >= maxRelaxedDate {
		dst = append(dst, `{"$date":{"$numberLong":"`...)
		dst = strconv.AppendInt(dst, ms, 10)
		return append(dst, `"}}`...)
	}
	dst = append(dst, `{"$date":"`...)
	if day := ms / 86400000; day != w.day {
		appendDay(w.dayText[:0], day)
		w.day = day
	}
	dst = append(dst, w.dayText[:]...)
	dst = appendTimeOfDay(dst, ms%86400000)
	return append(dst, `"}`...)
}

func short(p, end int, t byte, need int) error {
	return malformed(p, "%s needs %d bytes, %d remain", typeName(t), need, max(end-p, 0))
}

func typeName(t byte) string {
	switch t {
	case 0x01:
		return "double"
	case 0x02:
		return "string"
	case 0x03:
		return "document"
	case 0x04:
		return "array"
	case 0x05:
		return "binary"
	case 0x07:
		return "ObjectId"
	case 0x08:
		return "boolean"
	case 0x09:
		return "datetime"
	case 0x0B:
		return "regular expression"
	case 0x0C:
		return "DBPointer"
	case 0x0D:
		return "JavaScript code"
	case 0x0E:
		return "symbol"
	case 0x0F:
		return "code-with-scope"
	case 0x10:
		return "int32"
	case 0x11:
		return "timestamp"
	case 0x12:
		return "int64"
	case 0x13:
		return "decimal128"
	}
	return fmt.Sprintf("type 0x%02x", t)
}
