package encode

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"pgregory.net/rapid"
)

// driverExtJSON is the reference: the driver's own Extended JSON writer,
// given doc with every non-canonical decimal128 made the zero it is (see
// appendDecimal128: the driver prints those as they are).
func driverExtJSON(t testing.TB, doc []byte, canonical bool) []byte {
	t.Helper()
	doc = bytes.Clone(doc)
	zeroNonCanonicalDecimals(doc)
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
// Decimal128.String over every bit pattern class, but for a non-canonical
// significand (above 10^34-1), which is zero: the driver prints it as it
// is, and then cannot parse what it printed. Its want is the driver's text
// for the zero of the same sign and exponent.
func TestPropertyDecimal128(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := genDecimal().Draw(rt, "d")
		one := appendOne(nil, "", bson.RawValue{Type: bson.TypeDecimal128, Value: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, d[1]), d[0])})
		zeroNonCanonicalDecimals(one)
		want := bson.Raw(one).Lookup("").Decimal128().String()
		if got := appendDecimal128(nil, d[0], d[1]); string(got) != want {
			rt.Fatalf("decimal128 %#x %#x: got %s, want %s", d[0], d[1], got, want)
		}
	})
}

// zeroNonCanonicalDecimals clears, in place, the significand of every
// decimal128 in doc (nested documents, arrays and scopes too) that is
// above 10^34-1, keeping its sign and exponent.
func zeroNonCanonicalDecimals(doc []byte) {
	elems, err := bsoncore.Document(doc).Elements()
	if err != nil {
		return // the driver reports it
	}
	for _, e := range elems {
		v := e.Value() // its Data is doc's bytes
		switch v.Type {
		case bsoncore.TypeDecimal128:
			l := binary.LittleEndian.Uint64(v.Data)
			h := binary.LittleEndian.Uint64(v.Data[8:])
			if h>>58&0x1F < 0x1E && h>>61&3 != 3 {
				sig := new(big.Int).Lsh(new(big.Int).SetUint64(h&(1<<49-1)), 64)
				if sig.Or(sig, new(big.Int).SetUint64(l)).Cmp(maxSignificand) > 0 {
					binary.LittleEndian.PutUint64(v.Data, 0)
					binary.LittleEndian.PutUint64(v.Data[8:], h&^(1<<49-1))
				}
			}
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			zeroNonCanonicalDecimals(v.Data)
		case bsoncore.TypeCodeWithScope:
			if _, scope, ok := v.CodeWithScopeOK(); ok {
				zeroNonCanonicalDecimals(scope)
			}
		}
	}
}

// maxSignificand is 10^34-1, the largest canonical decimal128 significand.
var maxSignificand = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(34), nil), big.NewInt(1))

// TestDecimal128NonCanonicalIsZero: a significand above 10^34-1 prints as
// zero with its exponent, which the driver parses back.
func TestDecimal128NonCanonicalIsZero(t *testing.T) {
	for _, tc := range []struct {
		h, l uint64
		want string
	}{
		{0x3040000000000000 | maxSignificandHi, maxSignificandLo, "9999999999999999999999999999999999"},
		{0x3040000000000000 | maxSignificandHi, maxSignificandLo + 1, "0"},
		{0x0000000000000000 | 0x1ed09bead87c1, 0, "0E-6176"},
		{0xB040000000000000 | (1<<49 - 1), 0, "-0"},
	} {
		got := string(appendDecimal128(nil, tc.h, tc.l))
		if got != tc.want {
			t.Errorf("decimal128 %#x %#x = %s, want %s", tc.h, tc.l, got, tc.want)
		}
		if _, err := bson.ParseDecimal128(got); err != nil {
			t.Errorf("the driver cannot parse %s: %v", got, err)
		}
	}
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

// TestPropertyDouble checks the double formatter, fast path included,
// against the driver's rule: strconv's shortest %G, plus ".0" when that
// has neither a point nor an exponent.
func TestPropertyDouble(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var f float64
		switch rapid.IntRange(0, 3).Draw(rt, "kind") {
		case 0: // a short decimal, as prices and coordinates are
			n := rapid.Int64Range(-1e12, 1e12).Draw(rt, "n")
			f = float64(n) / []float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7}[rapid.IntRange(0, 7).Draw(rt, "k")]
		case 1: // near the plain-notation bounds
			f = rapid.SampledFrom([]float64{1e-4, 1e6, 999999.99999, 999999.5, 0.00011, 0.0001000001, 1e-4 * 0.99999999}).Draw(rt, "edge")
			f = math.Nextafter(f, rapid.SampledFrom([]float64{0, f, 2 * f}).Draw(rt, "towards"))
		case 2:
			f = rapid.Float64Range(-2e6, 2e6).Draw(rt, "range")
		default:
			f = genDouble().Draw(rt, "any")
		}
		want := strconv.FormatFloat(f, 'G', -1, 64)
		if !strings.ContainsAny(want, ".E") && !strings.Contains(want, "Inf") && want != "NaN" {
			want += ".0"
		}
		got := string(appendDoubleText(nil, f))
		if strings.Contains(want, "Inf") || want == "NaN" {
			return
		}
		if got != want {
			rt.Fatalf("double %v (%#x): got %s, want %s", f, math.Float64bits(f), got, want)
		}
	})
}
