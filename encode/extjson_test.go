package encode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"pgregory.net/rapid"
)

func mustMarshal(t testing.TB, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTypes pins the output for each BSON type in both modes, and checks
// that the driver agrees with the pinned text.
func TestTypes(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("65a1b2c3d4e5f60718293a4b")
	dec, _ := bson.ParseDecimal128("-1.05E+3")
	tests := map[string]struct {
		value     any
		relaxed   string
		canonical string
	}{
		"double":            {1.5, `1.5`, `{"$numberDouble":"1.5"}`},
		"double integral":   {42.0, `42.0`, `{"$numberDouble":"42.0"}`},
		"double exponent":   {1e21, `1E+21`, `{"$numberDouble":"1E+21"}`},
		"double million":    {1e6, `1E+06`, `{"$numberDouble":"1E+06"}`},
		"double small":      {1e-7, `1E-07`, `{"$numberDouble":"1E-07"}`},
		"double neg zero":   {math.Copysign(0, -1), `-0.0`, `{"$numberDouble":"-0.0"}`},
		"double NaN":        {math.NaN(), `{"$numberDouble":"NaN"}`, `{"$numberDouble":"NaN"}`},
		"double +Inf":       {math.Inf(1), `{"$numberDouble":"Infinity"}`, `{"$numberDouble":"Infinity"}`},
		"double -Inf":       {math.Inf(-1), `{"$numberDouble":"-Infinity"}`, `{"$numberDouble":"-Infinity"}`},
		"string":            {"a\"b\\c\n\x01\u2028é", `"a\"b\\c\n\u0001\u2028é"`, `"a\"b\\c\n\u0001\u2028é"`},
		"string html":       {"<a>&", `"<a>&"`, `"<a>&"`},
		"document":          {bson.D{{Key: "x", Value: int32(1)}}, `{"x":1}`, `{"x":{"$numberInt":"1"}}`},
		"empty document":    {bson.D{}, `{}`, `{}`},
		"array":             {bson.A{int32(1), "two", nil}, `[1,"two",null]`, `[{"$numberInt":"1"},"two",null]`},
		"empty array":       {bson.A{}, `[]`, `[]`},
		"binary":            {bson.Binary{Subtype: 0, Data: []byte("hi!")}, `{"$binary":{"base64":"aGkh","subType":"00"}}`, `{"$binary":{"base64":"aGkh","subType":"00"}}`},
		"binary uuid":       {bson.Binary{Subtype: 4, Data: make([]byte, 16)}, `{"$binary":{"base64":"AAAAAAAAAAAAAAAAAAAAAA==","subType":"04"}}`, `{"$binary":{"base64":"AAAAAAAAAAAAAAAAAAAAAA==","subType":"04"}}`},
		"binary old":        {bson.Binary{Subtype: 2, Data: []byte("old")}, `{"$binary":{"base64":"b2xk","subType":"02"}}`, `{"$binary":{"base64":"b2xk","subType":"02"}}`},
		"binary user":       {bson.Binary{Subtype: 0x80, Data: nil}, `{"$binary":{"base64":"","subType":"80"}}`, `{"$binary":{"base64":"","subType":"80"}}`},
		"undefined":         {bson.Undefined{}, `{"$undefined":true}`, `{"$undefined":true}`},
		"objectid":          {oid, `{"$oid":"65a1b2c3d4e5f60718293a4b"}`, `{"$oid":"65a1b2c3d4e5f60718293a4b"}`},
		"true":              {true, `true`, `true`},
		"false":             {false, `false`, `false`},
		"datetime":          {bson.DateTime(1700000000123), `{"$date":"2023-11-14T22:13:20.123Z"}`, `{"$date":{"$numberLong":"1700000000123"}}`},
		"datetime trimmed":  {bson.DateTime(1700000000120), `{"$date":"2023-11-14T22:13:20.12Z"}`, `{"$date":{"$numberLong":"1700000000120"}}`},
		"datetime whole":    {bson.DateTime(0), `{"$date":"1970-01-01T00:00:00Z"}`, `{"$date":{"$numberLong":"0"}}`},
		"datetime pre 1970": {bson.DateTime(-1), `{"$date":{"$numberLong":"-1"}}`, `{"$date":{"$numberLong":"-1"}}`},
		"datetime 9999":     {bson.DateTime(maxRelaxedDate - 1), `{"$date":"9999-12-31T23:59:59.999Z"}`, `{"$date":{"$numberLong":"253402300799999"}}`},
		"datetime 10000":    {bson.DateTime(maxRelaxedDate), `{"$date":{"$numberLong":"253402300800000"}}`, `{"$date":{"$numberLong":"253402300800000"}}`},
		"null":              {nil, `null`, `null`},
		"regex":             {bson.Regex{Pattern: `^a"b$`, Options: "xsim"}, `{"$regularExpression":{"pattern":"^a\"b$","options":"imsx"}}`, `{"$regularExpression":{"pattern":"^a\"b$","options":"imsx"}}`},
		"dbpointer":         {bson.DBPointer{DB: "db.c", Pointer: oid}, `{"$dbPointer":{"$ref":"db.c","$id":{"$oid":"65a1b2c3d4e5f60718293a4b"}}}`, `{"$dbPointer":{"$ref":"db.c","$id":{"$oid":"65a1b2c3d4e5f60718293a4b"}}}`},
		"javascript":        {bson.JavaScript("f()"), `{"$code":"f()"}`, `{"$code":"f()"}`},
		"symbol":            {bson.Symbol("sym"), `{"$symbol":"sym"}`, `{"$symbol":"sym"}`},
		"code with scope":   {bson.CodeWithScope{Code: "x", Scope: bson.D{{Key: "n", Value: int64(2)}}}, `{"$code":"x","$scope":{"n":2}}`, `{"$code":"x","$scope":{"n":{"$numberLong":"2"}}}`},
		"code empty scope":  {bson.CodeWithScope{Code: "", Scope: bson.D{}}, `{"$code":"","$scope":{}}`, `{"$code":"","$scope":{}}`},
		"int32":             {int32(math.MinInt32), `-2147483648`, `{"$numberInt":"-2147483648"}`},
		"timestamp":         {bson.Timestamp{T: 1700000000, I: 7}, `{"$timestamp":{"t":1700000000,"i":7}}`, `{"$timestamp":{"t":1700000000,"i":7}}`},
		"int64":             {int64(math.MaxInt64), `9223372036854775807`, `{"$numberLong":"9223372036854775807"}`},
		"decimal128":        {dec, `{"$numberDecimal":"-1.05E+3"}`, `{"$numberDecimal":"-1.05E+3"}`},
		"minkey":            {bson.MinKey{}, `{"$minKey":1}`, `{"$minKey":1}`},
		"maxkey":            {bson.MaxKey{}, `{"$maxKey":1}`, `{"$maxKey":1}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			doc := mustMarshal(t, bson.D{{Key: "k", Value: tt.value}})
			for _, mode := range []struct {
				canonical bool
				want      string
				f         func([]byte, []byte) ([]byte, error)
			}{{false, tt.relaxed, AppendRelaxed}, {true, tt.canonical, AppendCanonical}} {
				want := `{"k":` + mode.want + `}`
				got, err := mode.f(nil, doc)
				if err != nil {
					t.Fatalf("canonical=%v: %v", mode.canonical, err)
				}
				if string(got) != want {
					t.Errorf("canonical=%v:\n got %s\nwant %s", mode.canonical, got, want)
				}
				if driver := driverExtJSON(t, doc, mode.canonical); string(driver) != want {
					t.Errorf("canonical=%v: the driver writes %s, the test expects %s", mode.canonical, driver, want)
				}
			}
		})
	}
}

// elementDoc builds a document with one element of type t, key "k" and the
// raw value bytes given, so that tests can write what bson.Marshal would not.
func elementDoc(t byte, value ...byte) []byte {
	body := append([]byte{t, 'k', 0}, value...)
	n := 4 + len(body) + 1
	doc := binary.LittleEndian.AppendUint32(nil, uint32(n))
	doc = append(doc, body...)
	return append(doc, 0)
}

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestMalformed feeds broken BSON: each case must fail with an error that
// wraps ErrMalformed and names the problem, the driver must reject it too,
// and dst must come back unchanged.
func TestMalformed(t *testing.T) {
	okString := cat(le32(2), []byte("a\x00"))
	tests := map[string]struct {
		data []byte
		want string
	}{
		"nil":                         {nil, "offset 0: document of 0 bytes is too short"},
		"three bytes":                 {[]byte{5, 0, 0}, "too short to hold its length"},
		"length below 5":              {[]byte{4, 0, 0, 0, 0}, "document length 4 is less than the minimum of 5"},
		"negative length":             {[]byte{0xff, 0xff, 0xff, 0xff, 0}, "document length -1 is less than"},
		"length beyond input":         {[]byte{6, 0, 0, 0, 0}, "document length 6 exceeds the 5 bytes given"},
		"no terminator":               {[]byte{5, 0, 0, 0, 1}, "offset 4: document starting at offset 0 does not end with a NUL byte"},
		"early terminator":            {[]byte{7, 0, 0, 0, 0, 0, 0}, "offset 4: document starting at offset 0 ends early"},
		"unknown type":                {elementDoc(0x14), "offset 7: unknown BSON type 0x14"},
		"unknown type 0x80":           {elementDoc(0x80), "unknown BSON type 0x80"},
		"key not terminated":          {[]byte{8, 0, 0, 0, 0x0A, 'a', 'b', 0}, "offset 5: element key is not NUL-terminated"},
		"truncated double":            {elementDoc(0x01, 1, 2, 3), "offset 7: double needs 8 bytes, 3 remain"},
		"truncated int32":             {elementDoc(0x10, 1), "int32 needs 4 bytes, 1 remain"},
		"truncated int64":             {elementDoc(0x12, 1, 2), "int64 needs 8 bytes"},
		"truncated timestamp":         {elementDoc(0x11, 1), "timestamp needs 8 bytes"},
		"truncated datetime":          {elementDoc(0x09), "datetime needs 8 bytes, 0 remain"},
		"truncated decimal128":        {elementDoc(0x13, make([]byte, 15)...), "decimal128 needs 16 bytes, 15 remain"},
		"truncated objectid":          {elementDoc(0x07, make([]byte, 11)...), "ObjectId needs 12 bytes, 11 remain"},
		"boolean 2":                   {elementDoc(0x08, 2), "offset 7: boolean byte is 0x02, not 0 or 1"},
		"string zero length":          {elementDoc(0x02, cat(le32(0), []byte{0})...), "offset 7: string length 0 is not positive"},
		"string negative length":      {elementDoc(0x02, cat(le32(-3), []byte{0})...), "string length -3 is not positive"},
		"string too long":             {elementDoc(0x02, cat(le32(9), []byte("ab\x00"))...), "string length 9 runs past the 3 bytes that remain"},
		"string without NUL":          {elementDoc(0x02, cat(le32(2), []byte("ab"))...), "offset 12: string is not NUL-terminated"},
		"javascript without NUL":      {elementDoc(0x0D, cat(le32(1), []byte("a"))...), "JavaScript code is not NUL-terminated"},
		"symbol too long":             {elementDoc(0x0E, cat(le32(50), []byte("a\x00"))...), "symbol length 50 runs past"},
		"nested length too big":       {elementDoc(0x03, cat(le32(50), []byte{0})...), "offset 7: document length 50 is outside 5..5"},
		"nested length too small":     {elementDoc(0x03, cat(le32(5), []byte{0x0A, 'a', 0, 0})...), "document starting at offset 7 does not end with a NUL byte"},
		"nested terminator early":     {elementDoc(0x04, cat(le32(6), []byte{0, 0})...), "array starting at offset 7 ends early"},
		"nested too short":            {elementDoc(0x03, 5, 0), "document needs at least 5 bytes, 2 remain"},
		"binary negative":             {elementDoc(0x05, cat(le32(-1), []byte{0})...), "offset 7: binary length -1 is negative"},
		"binary too long":             {elementDoc(0x05, cat(le32(4), []byte{0, 'a'})...), "binary length 4 runs past the 1 bytes that remain"},
		"binary truncated":            {elementDoc(0x05, 1, 0), "binary needs 5 bytes, 2 remain"},
		"old binary inner too long":   {elementDoc(0x05, cat(le32(6), []byte{2}, le32(3), []byte("ab"))...), "old binary inner length 3 exceeds its outer length 6 less 4"},
		"old binary inner negative":   {elementDoc(0x05, cat(le32(6), []byte{2}, le32(-2), []byte("ab"))...), "old binary inner length -2 is negative"},
		"regex pattern unterminated":  {[]byte{9, 0, 0, 0, 0x0B, 'k', 0, 'a', 0}, "offset 7: regular expression pattern is not NUL-terminated"},
		"regex options unterminated":  {[]byte{11, 0, 0, 0, 0x0B, 'k', 0, 'a', 0, 'i', 0}, "offset 9: regular expression options are not NUL-terminated"},
		"dbpointer short oid":         {elementDoc(0x0C, cat(okString, make([]byte, 5))...), "DBPointer needs 12 bytes, 5 remain"},
		"code with scope total wrong": {elementDoc(0x0F, cat(le32(99), okString, le32(5), []byte{0})...), "code-with-scope length 99 does not match its parts (8 + code 2 + scope 5)"},
		"code with scope code length": {elementDoc(0x0F, cat(le32(15), le32(0), le32(5), []byte{0})...), "code-with-scope code length 0 is not positive"},
		"code with scope bad scope":   {elementDoc(0x0F, cat(le32(15), okString, le32(5), []byte{1})...), "document starting at offset 17 does not end with a NUL byte"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, derr := driverMarshal(tt.data, false); derr == nil {
				t.Fatalf("the driver accepts %x; the case proves nothing", tt.data)
			}
			for _, f := range []func([]byte, []byte) ([]byte, error){AppendRelaxed, AppendCanonical} {
				dst := []byte("keep")
				got, err := f(dst, tt.data)
				if err == nil {
					t.Fatalf("accepted %x as %s", tt.data, got)
				}
				if !errors.Is(err, ErrMalformed) {
					t.Errorf("error %v does not wrap ErrMalformed", err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q does not contain %q", err, tt.want)
				}
				if string(got) != "keep" {
					t.Errorf("dst changed to %q on error", got)
				}
			}
		})
	}
}

// TestDriverLeniency covers input the driver accepts although it bends the
// BSON specification; the writers must accept it and agree with the driver.
func TestDriverLeniency(t *testing.T) {
	oldBinary := func(outer, inner int32, data string) []byte {
		return cat(le32(outer), []byte{2}, le32(inner), []byte(data))
	}
	nested := func(elem []byte) []byte {
		d := elementDoc(0x03)
		inner := cat(le32(int32(4+len(elem)+1)), elem, []byte{0})
		return cat(le32(int32(len(d)+len(inner))), d[4:len(d)-1], inner, []byte{0})
	}
	tests := map[string]struct {
		data []byte
		want string
	}{
		"trailing bytes ignored": {append(mustMarshal(t, bson.D{{Key: "a", Value: int32(1)}}), "garbage"...), `{"a":1}`},
		"array keys ignored":     {elementDoc(0x04, cat(le32(12), []byte{0x10, 'x', 0}, le32(7), []byte{0})...), `{"k":[7]}`},
		// At the top level the outer length bounds an old binary value
		// and a shorter inner length shows fewer bytes.
		"old binary short inner": {elementDoc(0x05, oldBinary(8, 2, "abcd")...), `{"k":{"$binary":{"base64":"YWI=","subType":"02"}}}`},
		// Deeper down, the inner length alone says where the value ends;
		// here the two bytes left over form a null element "".
		"nested old binary short inner": {nested(cat([]byte{0x05, 'b', 0}, oldBinary(8, 2, "ab"), []byte{0x0A, 0})), `{"k":{"b":{"$binary":{"base64":"YWI=","subType":"02"}},"":null}}`},
		"old binary length 4":           {elementDoc(0x05, cat(le32(4), []byte{2}, []byte("abcd"))...), `{"k":{"$binary":{"base64":"YWJjZA==","subType":"02"}}}`},
		"code without NUL":              {elementDoc(0x0F, cat(le32(15), le32(2), []byte("ab"), le32(5), []byte{0})...), `{"k":{"$code":"a","$scope":{}}}`},
		"dbpointer namespace raw":       {elementDoc(0x0C, cat(le32(4), []byte("a\"\n\x00"), make([]byte, 12))...), "{\"k\":{\"$dbPointer\":{\"$ref\":\"a\"\n\",\"$id\":{\"$oid\":\"000000000000000000000000\"}}}}"},
		"regex options invalid utf8":    {[]byte{13, 0, 0, 0, 0x0B, 'k', 0, 0, 'x', 0xff, 'a', 0, 0}, "{\"k\":{\"$regularExpression\":{\"pattern\":\"\",\"options\":\"ax\uFFFD\"}}}"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			want, derr := driverMarshal(tt.data, false)
			if derr != nil {
				t.Fatalf("the driver rejects %x: %v", tt.data, derr)
			}
			if string(want) != tt.want {
				t.Fatalf("the driver writes %s, the test expects %s", want, tt.want)
			}
			got, err := AppendRelaxed(nil, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// nest wraps doc in n further levels of {"d": ...} (or ["..."] arrays).
func nest(doc []byte, n int, array bool) []byte {
	for range n {
		if array {
			doc = bsoncore.BuildDocument(nil, bsoncore.AppendArrayElement(nil, "0", doc))
		} else {
			doc = bsoncore.BuildDocument(nil, bsoncore.AppendDocumentElement(nil, "d", doc))
		}
	}
	return doc
}

func TestDepth(t *testing.T) {
	empty := bsoncore.BuildDocument(nil)
	for _, array := range []bool{false, true} {
		ok := nest(empty, MaxDepth-1, array) // MaxDepth levels in all
		got, err := AppendRelaxed(nil, ok)
		if err != nil {
			t.Fatalf("array=%v: %d levels: %v", array, MaxDepth, err)
		}
		if want := driverExtJSON(t, ok, false); !bytes.Equal(got, want) {
			t.Fatalf("array=%v: output differs from the driver", array)
		}
		deep := nest(empty, MaxDepth, array)
		_, err = AppendRelaxed(nil, deep)
		if !errors.Is(err, ErrTooDeep) {
			t.Fatalf("array=%v: %d levels: error %v, want ErrTooDeep", array, MaxDepth+1, err)
		}
		if !strings.Contains(err.Error(), "more than 200 levels") {
			t.Errorf("error %q does not say the limit", err)
		}
	}
	// A code-with-scope scope counts as a level.
	scoped := bsoncore.BuildDocument(nil, bsoncore.AppendCodeWithScopeElement(nil, "c", "x", nest(empty, MaxDepth-2, false)))
	if _, err := AppendRelaxed(nil, scoped); err != nil {
		t.Fatalf("scope at the limit: %v", err)
	}
	scoped = bsoncore.BuildDocument(nil, bsoncore.AppendCodeWithScopeElement(nil, "c", "x", nest(empty, MaxDepth-1, false)))
	if _, err := AppendRelaxed(nil, scoped); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("scope past the limit: error %v, want ErrTooDeep", err)
	}
	// A hostile, well-formed document nested 100,000 levels deep is
	// refused, without exhausting the stack.
	const levels = 100_000
	hostile := make([]byte, 0, 8*levels)
	for k := range levels {
		hostile = binary.LittleEndian.AppendUint32(hostile, uint32(5+8*(levels-1-k)))
		if k < levels-1 {
			hostile = append(hostile, 0x03, 'd', 0)
		}
	}
	hostile = append(hostile, make([]byte, levels)...)
	if _, err := AppendRelaxed(nil, hostile); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("%d levels: error %v, want ErrTooDeep", levels, err)
	}
}

func TestValue(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("65a1b2c3d4e5f60718293a4b")
	tests := map[string]struct {
		value     any
		relaxed   string
		canonical string
	}{
		"objectid": {oid, `{"$oid":"65a1b2c3d4e5f60718293a4b"}`, `{"$oid":"65a1b2c3d4e5f60718293a4b"}`},
		"int64":    {int64(-5), `-5`, `{"$numberLong":"-5"}`},
		"string":   {"a\tb", `"a\tb"`, `"a\tb"`},
		"document": {bson.D{{Key: "x", Value: 1.0}}, `{"x":1.0}`, `{"x":{"$numberDouble":"1.0"}}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			typ, val, err := bson.MarshalValue(tt.value)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendRelaxedValue(nil, typ, val)
			if err != nil || string(got) != tt.relaxed {
				t.Errorf("relaxed: got %s, %v; want %s", got, err, tt.relaxed)
			}
			got, err = AppendCanonicalValue(nil, typ, val)
			if err != nil || string(got) != tt.canonical {
				t.Errorf("canonical: got %s, %v; want %s", got, err, tt.canonical)
			}
		})
	}

	errTests := map[string]struct {
		typ   bson.Type
		value []byte
		want  string
	}{
		"trailing bytes": {bson.TypeInt32, []byte{1, 0, 0, 0, 9}, "offset 4: 1 bytes after the int32 value"},
		"short":          {bson.TypeInt64, []byte{1}, "offset 0: int64 needs 8 bytes, 1 remain"},
		"unknown type":   {bson.Type(0), nil, "unknown BSON type 0x00"},
		"empty string":   {bson.TypeString, nil, "string needs 4 bytes, 0 remain"},
	}
	for name, tt := range errTests {
		t.Run(name, func(t *testing.T) {
			got, err := AppendRelaxedValue([]byte("keep"), tt.typ, tt.value)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrMalformed containing %q", err, tt.want)
			}
			if string(got) != "keep" {
				t.Errorf("dst changed to %q on error", got)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"empty":          {"", `""`},
		"plain":          {"hello, world", `"hello, world"`},
		"long plain":     {strings.Repeat("abcdefgh", 9) + "x", `"` + strings.Repeat("abcdefgh", 9) + `x"`},
		"quote in run":   {"abcdefg\"hijklmnop", `"abcdefg\"hijklmnop"`},
		"named escapes":  {"\"\\\n\r\t\b\f", `"\"\\\n\r\t\b\f"`},
		"controls":       {"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		"html unescaped": {"<>&'", `"<>&'"`},
		"separators":     {"a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		"unicode":        {"héllo 世界 😀", `"héllo 世界 😀"`},
		"invalid utf8":   {"a\xffb\xc3", `"a\ufffdb\ufffd"`},
		"surrogate":      {"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		"replacement":    {"\uFFFD", "\"\uFFFD\""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := AppendString([]byte("x"), tt.in); string(got) != "x"+tt.want {
				t.Errorf("AppendString(%q) = %s, want x%s", tt.in, got, tt.want)
			}
		})
	}
}

// TestISODate compares the date formatter with the time package's, which
// the driver uses, over the whole relaxed range.
func TestISODate(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ms := rapid.OneOf(
			rapid.Int64Range(0, maxRelaxedDate-1),
			rapid.SampledFrom([]int64{0, 1, 10, 100, 999, 1000, 951782400000, 951868799999, 68169600000, 4107542400000, 4107628799999, maxRelaxedDate - 1}),
		).Draw(rt, "ms")
		want := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00")
		if got := appendISODate(nil, ms); string(got) != want {
			rt.Fatalf("appendISODate(%d) = %s, want %s", ms, got, want)
		}
	})
}

func TestAllocations(t *testing.T) {
	doc := mustMarshal(t, bson.D{
		{Key: "s", Value: "text"}, {Key: "n", Value: 1.5}, {Key: "d", Value: bson.DateTime(1700000000000)},
		{Key: "r", Value: bson.Regex{Pattern: "a", Options: "mi"}}, {Key: "b", Value: bson.Binary{Data: []byte("x")}},
		{Key: "a", Value: bson.A{int32(1), int64(2), bson.D{{Key: "x", Value: nil}}}},
	})
	dst := make([]byte, 0, 1024)
	for _, f := range []func([]byte, []byte) ([]byte, error){AppendRelaxed, AppendCanonical} {
		if n := testing.AllocsPerRun(100, func() { _, _ = f(dst[:0], doc) }); n != 0 {
			t.Errorf("%v allocations per document with a reused buffer, want 0", n)
		}
	}
}
