package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// TestOverflowJSON nests the entries of one object under it, in
// document order, and escapes keys as JSON.
func TestOverflowJSON(t *testing.T) {
	var o overflow
	b := func(parts ...string) [][]byte {
		out := make([][]byte, len(parts))
		for i, p := range parts {
			out[i] = []byte(p)
		}
		return out
	}
	o.add(b("a"), []byte(`1`))
	o.add(b("b", "x"), []byte(`"x"`))
	o.add(b("b", "y"), []byte(`null`))
	o.add(b("c", "d"), []byte(`{}`))
	o.add(b(`q"\`+"\x01"), []byte(`true`))
	got := string(o.appendJSON(nil))
	want := `{"a":1,"b":{"x":"x","y":null},"c":{"d":{}},"q\"\\\u0001":true}`
	if got != want {
		t.Errorf("overflow = %s, want %s", got, want)
	}
	o.reset()
	if !o.empty() || string(o.appendJSON(nil)) != "{}" {
		t.Errorf("reset overflow = %s", o.appendJSON(nil))
	}
}

// TestNameFor: the first path to claim a name keeps it; the others, and
// names too long or taken by tide, get the path's hash, the same every
// time, within 63 bytes.
func TestNameFor(t *testing.T) {
	for range 2 { // the same decisions on every run
		l := newLayout(kInt64, "long")
		first := l.add([]string{"a__b"}, kText, nil, "string")
		second := l.add([]string{"a", "b"}, kText, nil, "string")
		if first.name != "a__b" || second.name == "a__b" || !strings.HasPrefix(second.name, "a__b_") {
			t.Errorf("names %q and %q", first.name, second.name)
		}
		if second.name != l.clone().byPath[pathKey([]string{"a", "b"})].name {
			t.Error("a clone does not keep the names")
		}
		long := strings.Repeat("é", 40) // 80 bytes
		n := l.nameFor([]string{long})
		if len(n) > maxIdentifier || !strings.HasPrefix(n, "éé") {
			t.Errorf("long name %q (%d bytes)", n, len(n))
		}
		if got := l.nameFor([]string{"_tide_op"}); got == "_tide_op" {
			t.Error("a field named _tide_op took tide's column")
		}
		if got := l.nameFor([]string{""}); got == "" {
			t.Error("an empty field name made an empty column name")
		}
	}
}

func TestFitsPrecision(t *testing.T) {
	for s, want := range map[string]bool{
		"12.5": true, "12.50": true, "1.234": false, "9999999999.99": true, "99999999999": false,
		"0.001": false, "0": true, "1.2000": true, "NaN": true, "Infinity": false,
	} {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		h, l := d.GetBytes()
		v := bsoncore.Value{Type: bsoncore.TypeDecimal128, Data: bsoncore.AppendDecimal128(nil, h, l)}
		n, ok := numericOf(v)
		if !ok {
			t.Fatalf("%s: not a numeric", s)
		}
		if got := fitsPrecision(n, 12, 2); got != want {
			t.Errorf("%s fits numeric(12,2) = %v, want %v", s, got, want)
		}
	}
	if _, ok := numericOf(bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, negZero())}); ok {
		t.Error("-0.0 converted to numeric, which has no negative zero")
	}
	n, _ := numericOf(bsoncore.Value{Type: bsoncore.TypeDouble, Data: bsoncore.AppendDouble(nil, 0.1)})
	if n.Int.String() != "1" || n.Exp != -1 || n.InfinityModifier != pgtype.Finite {
		t.Errorf("0.1 as numeric = %se%d, want the shortest decimal, 1e-1", n.Int, n.Exp)
	}
}

func negZero() float64 {
	z := 0.0
	return -z
}

func TestParsePin(t *testing.T) {
	for in, want := range map[string]string{
		"Numeric(12, 2)": "numeric(12,2)", "TIMESTAMPTZ": "timestamp with time zone", "int8": "bigint",
		"double   precision": "double precision", "jsonb": "jsonb",
	} {
		p, err := parsePin(in)
		if err != nil || p.typ != want {
			t.Errorf("parsePin(%q) = %q, %v; want %q", in, p.typ, err, want)
		}
	}
	for _, bad := range []string{"money", "numeric(0,0)", "numeric(3,4)", "numeric(a)", "varchar(3)"} {
		if _, err := parsePin(bad); err == nil {
			t.Errorf("parsePin(%q) accepted", bad)
		}
	}
}
