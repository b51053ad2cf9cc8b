package encode

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"
)

// driverExtJSON is the reference: the driver's own Extended JSON writer.
func driverExtJSON(t testing.TB, doc []byte, canonical bool) []byte {
	t.Helper()
	want, err := bson.MarshalExtJSON(bson.Raw(doc), canonical, false)
	if err != nil {
		t.Fatalf("driver rejects a generated document %x: %v", doc, err)
	}
	return want
}

// TestPropertyMatchesDriver requires byte-identical output to the driver,
// in both modes, for generated documents of every BSON type.
func TestPropertyMatchesDriver(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		doc := genDocument(rt, 3, false)
		for _, canonical := range []bool{false, true} {
			want := driverExtJSON(t, doc, canonical)
			prefix := []byte("prefix")
			var got []byte
			var err error
			if canonical {
				got, err = AppendCanonical(prefix, doc)
			} else {
				got, err = AppendRelaxed(prefix, doc)
			}
			if err != nil {
				rt.Fatalf("canonical=%v: %v\ndocument %x", canonical, err, doc)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) {
				rt.Fatalf("canonical=%v: dst prefix lost: %q", canonical, got)
			}
			if got = got[len("prefix"):]; !bytes.Equal(got, want) {
				rt.Fatalf("canonical=%v: output differs from the driver\n got %s\nwant %s\ndocument %x", canonical, got, want, doc)
			}
		}
	})
}

// TestPropertyValueMatchesDriver checks AppendRelaxedValue and
// AppendCanonicalValue against the driver's output for {"v": value}.
func TestPropertyValueMatchesDriver(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		doc := bson.Raw(genDocument(rt, 2, false))
		elems, err := doc.Elements()
		if err != nil {
			rt.Fatal(err)
		}
		for _, e := range elems {
			v := e.Value()
			one := bson.Raw(appendOne(nil, "v", v))
			for _, canonical := range []bool{false, true} {
				want := driverExtJSON(t, one, canonical)
				want = want[len(`{"v":`) : len(want)-1]
				f := AppendRelaxedValue
				if canonical {
					f = AppendCanonicalValue
				}
				got, err := f(nil, v.Type, v.Value)
				if err != nil {
					rt.Fatalf("canonical=%v %s value %x: %v", canonical, v.Type, v.Value, err)
				}
				if !bytes.Equal(got, want) {
					rt.Fatalf("canonical=%v %s value: got %s, want %s", canonical, v.Type, got, want)
				}
			}
		}
	})
}

// TestPropertyStringMatchesDriver checks AppendString against the driver's
// escaping of a string value.
func TestPropertyStringMatchesDriver(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := genString(false).Draw(rt, "s")
		want := driverExtJSON(t, appendOne(nil, "", bson.RawValue{Type: bson.TypeString, Value: appendBSONString(nil, s)}), false)
		want = want[len(`{"":`) : len(want)-1]
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			rt.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestPropertyDecimal128 compares the decimal128 text with the driver's
// Decimal128.String over every bit pattern class.
func TestPropertyDecimal128(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := genDecimal().Draw(rt, "d")
		want := bson.NewDecimal128(d[0], d[1]).String()
		if got := appendDecimal128(nil, d[0], d[1]); string(got) != want {
			rt.Fatalf("decimal128 %#x %#x: got %s, want %s", d[0], d[1], got, want)
		}
	})
}

// appendOne builds the document {key: v}.
func appendOne(dst []byte, key string, v bson.RawValue) []byte {
	n := 4 + 1 + len(key) + 1 + len(v.Value) + 1
	dst = append(dst, byte(n), byte(n>>8), byte(n>>16), byte(n>>24), byte(v.Type))
	dst = append(dst, key...)
	dst = append(dst, 0)
	dst = append(dst, v.Value...)
	return append(dst, 0)
}

// appendBSONString appends s as a BSON string value.
func appendBSONString(dst []byte, s string) []byte {
	n := len(s) + 1
	dst = append(dst, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	dst = append(dst, s...)
	return append(dst, 0)
}
