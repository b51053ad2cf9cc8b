package encode

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"
)

// TestStrictTypes pins the strict form of each type it changes, and that
// the driver's Extended JSON reader reads each back as the same value.
func TestStrictTypes(t *testing.T) {
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	roundTrip := bson.D{
		{Key: "i32", Value: int32(-5)},
		{Key: "i64", Value: int64(1 << 40)},
		{Key: "f", Value: 2.0},
		{Key: "date", Value: bson.DateTime(-1000)},
		{Key: "bin", Value: bson.Binary{Subtype: 4, Data: []byte{0xfb, 0xff}}},
		{Key: "oid", Value: oid},
		{Key: "ts", Value: bson.Timestamp{T: 7, I: 8}},
		{Key: "arr", Value: bson.A{int64(1), bson.D{{Key: "d", Value: bson.DateTime(0)}}}},
	}
	doc := mustMarshal(t, roundTrip)
	got, err := appendStrict(nil, doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"i32":-5,"i64":{"$numberLong":"1099511627776"},"f":2.0,"date":{"$date":-1000},` +
		`"bin":{"$binary":"+/8=","$type":"04"},` +
		`"oid":{"$oid":"0102030405060708090a0b0c"},"ts":{"$timestamp":{"t":7,"i":8}},` +
		`"arr":[{"$numberLong":"1"},{"d":{"$date":0}}]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var back bson.Raw
	if err := bson.UnmarshalExtJSON(got, false, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, doc) {
		t.Errorf("reads back as %s, want %s", back, bson.Raw(doc))
	}

	// The legacy forms of these two are the Java driver's; Go's reader
	// takes them for a query operator and a DBRef.
	legacy := mustMarshal(t, bson.D{{Key: "re", Value: bson.Regex{Pattern: `a"b`, Options: "xi"}},
		{Key: "p", Value: bson.DBPointer{DB: "d.c", Pointer: oid}}})
	got, err = appendStrict(nil, legacy)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"re":{"$regex":"a\"b","$options":"ix"},"p":{"$ref":"d.c","$id":{"$oid":"0102030405060708090a0b0c"}}}`; string(got) != want {
		t.Errorf("regex and DBPointer: got %s, want %s", got, want)
	}

	if _, err := appendStrict([]byte("keep"), []byte{5, 0, 0, 0, 1}); err == nil {
		t.Error("a document without its NUL is accepted")
	}
}

// TestPropertyStrictReadable: for generated documents of every type, the
// strict form is JSON that the driver's Extended JSON reader accepts.
func TestPropertyStrictReadable(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		doc := genDocument(rt, 3, false)
		got, err := appendStrict(nil, doc)
		if err != nil {
			rt.Fatalf("%v\ndocument %x", err, doc)
		}
		if !json.Valid(got) {
			rt.Fatalf("not JSON: %s", got)
		}
		var back bson.Raw
		if err := bson.UnmarshalExtJSON(got, false, &back); err != nil {
			rt.Fatalf("the driver cannot read %s: %v", got, err)
		}
	})
}

// TestPropertyQuotedJSON: quoting the JSON this package writes takes the
// short cut and gives the string the general escaper gives, for generated
// documents in every mode, and for text with quotes, backslashes and
// control characters at every offset around the eight-byte steps.
func TestPropertyQuotedJSON(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		doc := genDocument(rt, 3, false)
		for _, mode := range []string{"relaxed", "canonical", "strict"} {
			var text []byte
			var err error
			switch mode {
			case "relaxed":
				text, err = AppendRelaxed(nil, doc)
			case "canonical":
				text, err = AppendCanonical(nil, doc)
			default:
				text, err = appendStrict(nil, doc)
			}
			if err != nil {
				rt.Fatal(err)
			}
			// Byte for byte, but for what the v2 writers copy raw
			// from a DBPointer's namespace (U+2028 stays itself, valid
			// JSON either way).
			got, want := appendQuotedJSON(nil, text), appendEscaped(nil, text)
			var g, w string
			if !json.Valid(got) || json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || g != w {
				rt.Fatalf("%s: quoted %s\nwant %s", mode, got, want)
			}
			if mode == "strict" && !bytes.Equal(got, want) {
				rt.Fatalf("%s: quoted %s\nwant %s", mode, got, want)
			}
		}
	})
	for n := range 20 {
		for _, c := range []byte{'"', '\\', '\n', 0x01, 'x'} {
			s := append(bytes.Repeat([]byte("ab"), n)[:n], c, 'z', '"')
			if got, want := appendQuotedJSON(nil, s), appendEscaped(nil, s); !bytes.Equal(got, want) {
				t.Errorf("%q: got %s, want %s", s, got, want)
			}
		}
	}
}
