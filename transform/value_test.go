package transform

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// TestBSONTypesInCEL checks the mapping of each BSON type to CEL, through
// expressions on a document holding one field of each.
func TestBSONTypesInCEL(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("65a1b2c3d4e5f60718293a4b")
	exact, _ := bson.ParseDecimal128("2.5")
	inexact, _ := bson.ParseDecimal128("0.1")
	doc := bson.D{
		{Key: "i32", Value: int32(7)}, {Key: "i64", Value: int64(1) << 40}, {Key: "dbl", Value: 1.5},
		{Key: "dec", Value: exact}, {Key: "dec_inexact", Value: inexact},
		{Key: "str", Value: "héllo"}, {Key: "yes", Value: true},
		{Key: "date", Value: bson.NewDateTimeFromTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))},
		{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 3}},
		{Key: "oid", Value: oid}, {Key: "bin", Value: bson.Binary{Data: []byte{1, 2, 3}}},
		{Key: "nul", Value: nil}, {Key: "sub", Value: bson.D{{Key: "a", Value: int32(1)}}},
		{Key: "arr", Value: bson.A{int32(1), "two", bson.D{{Key: "x", Value: 3.0}}}},
	}
	for _, where := range []string{
		`doc.i32 * 2 == 14 && type(doc.i32) == int`,
		`doc.i64 == 1099511627776`,
		`doc.dbl == 1.5 && type(doc.dbl) == double`,
		`doc.dec == 2.5 && type(doc.dec) == double`,
		`doc.dec_inexact == "0.1" && type(doc.dec_inexact) == string`,
		`doc.str == "héllo" && doc.str.size() == 5`,
		`doc.yes`,
		`doc.date == timestamp("2024-01-02T03:04:05Z")`,
		`doc.ts == timestamp("2023-11-14T22:13:20Z")`,
		`doc.oid == "65a1b2c3d4e5f60718293a4b"`,
		`doc.bin == b"\x01\x02\x03"`,
		`doc.nul == null && doc.missing == null`,
		`doc.sub.a == 1 && "a" in doc.sub && doc.sub.size() == 1`,
		`doc.arr.size() == 3 && doc.arr[1] == "two" && doc.arr[2].x == 3.0 && 1 in doc.arr`,
		`doc.sub == {"a": 1}`,
		`doc.arr.exists(v, v == "two")`,
	} {
		c, err := Compile([]Step{{Filter: &Filter{Where: where}}}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		ev := cdc.Event{Op: cdc.OpInsert, FullDocument: raw(t, doc)}
		if keep, err := c.Apply(&ev); err != nil || !keep {
			t.Errorf("%s: keep %v, err %v", where, keep, err)
		}
	}
}

// TestSetWritesBSONTypes checks what set writes for each CEL type.
func TestSetWritesBSONTypes(t *testing.T) {
	c, err := Compile([]Step{{Set: []Field{
		{"i", `doc.n + 1`}, {"big", `doc.n * 10000000000`}, {"d", `2.5`}, {"s", `"x"`}, {"b", `true`}, {"nul", `null`},
		{"t", `timestamp("2024-01-02T03:04:05Z")`}, {"bytes", `b"ab"`}, {"l", `[1, "a"]`}, {"m", `{"z": 1, "a": 2}`}, {"copy", `doc.sub`},
	}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := cdc.Event{Op: cdc.OpInsert, FullDocument: raw(t, bson.D{{Key: "n", Value: int32(1)}, {Key: "sub", Value: bson.D{{Key: "k", Value: "v"}}}})}
	if _, err := c.Apply(&ev); err != nil {
		t.Fatal(err)
	}
	want := `{"n":{"$numberInt":"1"},"sub":{"k":"v"},"i":{"$numberInt":"2"},"big":{"$numberLong":"10000000000"},"d":{"$numberDouble":"2.5"},"s":"x","b":true,"nul":null,` +
		`"t":{"$date":{"$numberLong":"1704164645000"}},"bytes":{"$binary":{"base64":"YWI=","subType":"00"}},"l":[{"$numberInt":"1"},"a"],"m":{"a":{"$numberInt":"2"},"z":{"$numberInt":"1"}},"copy":{"k":"v"}}`
	got, err := bson.MarshalExtJSON(bson.Raw(ev.FullDocument), true, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("doc:\n got %s\nwant %s", got, want)
	}
}
