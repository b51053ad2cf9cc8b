package changestream

import (
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Two tokens returned by a real MongoDB 7.x (mongo-reference.md §3.4, §3.8).
const (
	realInsertToken = "8267C867A2000000192B042C0100296E5A1004D3284E04D8914467A2160201812E4C4C463C6F7065726174696F6E54797065003C696E736572740046646F63756D656E744B65790046645F6964006467C867A2FB1CBCD579F4E4DE000004"
	realHWMToken    = "8267C867A3000000012B0429296E1404"
)

func mustDoc(t interface{ Fatal(...any) }, d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTokenMatchesRealMongoDB(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("67c867a2fb1cbcd579f4e4de")
	uuid, _ := hex.DecodeString("D3284E04D8914467A2160201812E4C4C")
	tests := map[string]struct {
		tok  Token
		want string
	}{
		"insert event": {
			tok: Token{
				ClusterTime: bson.Timestamp{T: 1741186978, I: 25}, Version: 2, Type: EventToken,
				UUID: uuid,
				EventID: mustDoc(t, bson.D{
					{Key: "operationType", Value: "insert"},
					{Key: "documentKey", Value: bson.D{{Key: "_id", Value: oid}}},
				}),
			},
			want: realInsertToken,
		},
		"high-water mark": {
			tok:  HWMToken(bson.Timestamp{T: 1741186979, I: 1}),
			want: realHWMToken,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.tok.Data()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("encoded\n got %s\nwant %s", got, tc.want)
			}
			ks, _ := hex.DecodeString(tc.want)
			back, err := DecodeKeyString(ks)
			if err != nil {
				t.Fatalf("decode real token: %v", err)
			}
			if back.ClusterTime != tc.tok.ClusterTime || back.Type != tc.tok.Type || back.Version != 2 ||
				!slices.Equal(back.UUID, tc.tok.UUID) || !bsonEqual(back.EventID, tc.tok.EventID) {
				t.Errorf("decoded %+v, want %+v", back, tc.tok)
			}
		})
	}
}

func bsonEqual(a, b bson.Raw) bool {
	return string(a) == string(b)
}

func TestTokenInvalidateDiffersOnlyInFlag(t *testing.T) {
	tok := Token{ClusterTime: bson.Timestamp{T: 5, I: 1}, Version: 2, Type: EventToken,
		UUID:    make([]byte, 16),
		EventID: mustDoc(t, bson.D{{Key: "operationType", Value: "drop"}})}
	a, _ := tok.Data()
	tok.FromInvalidate = true
	b, _ := tok.Data()
	if len(a) != len(b) || a >= b {
		t.Fatalf("invalidate token %s must sort right after %s", b, a)
	}
	if strings.Replace(a, "296E5A", "296F5A", 1) != b {
		t.Errorf("invalidate token %s differs from %s in more than the fromInvalidate byte", b, a)
	}
}

// genValue draws a BSON value of the kinds a document key may hold.
func genValue(depth int) *rapid.Generator[bson.RawValue] {
	return rapid.Custom(func(t *rapid.T) bson.RawValue {
		kinds := 14
		if depth > 2 {
			kinds = 12
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return rv(bson.TypeInt32, bsoncore.AppendInt32(nil, rapid.Int32().Draw(t, "i32")))
		case 1:
			return rv(bson.TypeInt64, bsoncore.AppendInt64(nil, rapid.Int64().Draw(t, "i64")))
		case 2:
			f := rapid.Float64().Draw(t, "f64")
			if math.IsNaN(f) {
				f = 0.5
			}
			return rv(bson.TypeDouble, bsoncore.AppendDouble(nil, f))
		case 3:
			return rv(bson.TypeString, bsoncore.AppendString(nil, rapid.String().Draw(t, "s")))
		case 4:
			var oid bson.ObjectID
			copy(oid[:], rapid.SliceOfN(rapid.Byte(), 12, 12).Draw(t, "oid"))
			return rv(bson.TypeObjectID, bsoncore.AppendObjectID(nil, oid))
		case 5:
			return rv(bson.TypeBoolean, bsoncore.AppendBoolean(nil, rapid.Bool().Draw(t, "b")))
		case 6:
			return rv(bson.TypeNull, nil)
		case 7:
			return rv(bson.TypeDateTime, bsoncore.AppendDateTime(nil, rapid.Int64().Draw(t, "ms")))
		case 8:
			return rv(bson.TypeBinary, bsoncore.AppendBinary(nil, rapid.Byte().Draw(t, "sub"), rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "bin")))
		case 9:
			return rv(bson.TypeTimestamp, bsoncore.AppendTimestamp(nil, rapid.Uint32().Draw(t, "t"), rapid.Uint32().Draw(t, "i")))
		case 10:
			return rv(bson.TypeMinKey, nil)
		case 11:
			return rv(bson.TypeMaxKey, nil)
		case 12:
			n := rapid.IntRange(0, 3).Draw(t, "n")
			idx, doc := bsoncore.AppendDocumentStart(nil)
			for i := range n {
				v := genValue(depth+1).Draw(t, "field")
				doc = bsoncore.AppendValueElement(doc, rapid.StringMatching(`[a-z]{1,4}`).Draw(t, "name")+string(rune('a'+i)), bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
			}
			doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
			return rv(bson.TypeEmbeddedDocument, doc)
		default:
			n := rapid.IntRange(0, 3).Draw(t, "n")
			idx, arr := bsoncore.AppendArrayStart(nil)
			for i := range n {
				v := genValue(depth+1).Draw(t, "elem")
				arr = bsoncore.AppendValueElement(arr, string(rune('0'+i)), bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
			}
			arr, _ = bsoncore.AppendArrayEnd(arr, idx)
			return rv(bson.TypeArray, arr)
		}
	})
}

func rv(t bson.Type, data []byte) bson.RawValue { return bson.RawValue{Type: t, Value: data} }

func genToken() *rapid.Generator[Token] {
	return rapid.Custom(func(t *rapid.T) Token {
		tok := Token{
			ClusterTime: bson.Timestamp{T: rapid.Uint32().Draw(t, "t"), I: rapid.Uint32().Draw(t, "i")},
			Version:     2,
			Type:        rapid.SampledFrom([]TokenType{HighWaterMark, EventToken}).Draw(t, "type"),
			TxnOpIndex:  rapid.IntRange(0, 1<<20).Draw(t, "txnOpIndex"),
		}
		if tok.Type == HighWaterMark {
			return tok
		}
		tok.FromInvalidate = rapid.Bool().Draw(t, "fromInvalidate")
		if rapid.Bool().Draw(t, "hasUUID") {
			tok.UUID = rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")
		}
		id := genValue(0).Draw(t, "_id")
		key := bsoncore.NewDocumentBuilder().AppendValue("_id", bsoncore.Value{Type: bsoncore.Type(id.Type), Data: id.Value}).Build()
		tok.EventID = mustDoc(t, bson.D{
			{Key: "operationType", Value: rapid.SampledFrom([]string{"insert", "update", "replace", "delete"}).Draw(t, "op")},
			{Key: "documentKey", Value: bson.Raw(key)},
		})
		if rapid.Bool().Draw(t, "split") {
			tok.Split, tok.FragmentNum = true, rapid.IntRange(0, 100).Draw(t, "fragment")
		}
		return tok
	})
}

// A token decodes to the same position it was encoded from: re-encoding the
// decoded token gives the same bytes, and every header field survives.
func TestTokenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tok := genToken().Draw(t, "token")
		doc, err := tok.Doc()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := tok.Data()
		if want, _ := bson.Marshal(bson.D{{Key: "_data", Value: data}}); string(doc) != string(want) {
			t.Fatalf("token document %x, want %x", doc, want)
		}
		back, err := ParseToken("resumeAfter", bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc})
		if err != nil {
			t.Fatalf("parse %s: %v", doc, err)
		}
		if back.ClusterTime != tok.ClusterTime || back.Type != tok.Type || back.TxnOpIndex != tok.TxnOpIndex ||
			back.FromInvalidate != tok.FromInvalidate || !slices.Equal(back.UUID, tok.UUID) ||
			back.Split != tok.Split || back.FragmentNum != tok.FragmentNum || (back.EventID == nil) != (tok.EventID == nil) {
			t.Fatalf("decoded %+v, want %+v", back, tok)
		}
		if !sameKeyString(back, tok) {
			t.Fatalf("re-encoded token differs from the original")
		}
	})
}

// Tokens compare as their _data strings do, and in the order of the
// positions they name.
func TestTokenOrderMatchesStrings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genToken().Draw(t, "a"), genToken().Draw(t, "b")
		da, _ := a.Data()
		db, _ := b.Data()
		if got, want := sign(Compare(a, b)), sign(strings.Compare(da, db)); got != want {
			t.Fatalf("Compare = %d, strings compare %d\n a %s\n b %s", got, want, da, db)
		}
		if a.ClusterTime != b.ClusterTime {
			want := sign(a.ClusterTime.Compare(b.ClusterTime))
			if got := sign(strings.Compare(da, db)); got != want {
				t.Fatalf("cluster times compare %d, tokens %d", want, got)
			}
		} else if a.Type != b.Type {
			if (a.Type == HighWaterMark) != (da < db) {
				t.Fatalf("a high-water mark must sort before an event token of the same time")
			}
		}
	})
}

// Numbers of different types and values sort by value, as MongoDB sorts
// them, and equal values encode alike whatever their type.
func TestKeyStringNumberOrder(t *testing.T) {
	vals := []bson.RawValue{
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, math.Inf(-1))),
		rv(bson.TypeInt64, bsoncore.AppendInt64(nil, math.MinInt64)),
		rv(bson.TypeInt64, bsoncore.AppendInt64(nil, -1<<40)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, -300.25)),
		rv(bson.TypeInt32, bsoncore.AppendInt32(nil, -300)),
		rv(bson.TypeInt32, bsoncore.AppendInt32(nil, -2)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, -0.5)),
		rv(bson.TypeInt32, bsoncore.AppendInt32(nil, 0)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, 1e-300)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, 0.75)),
		rv(bson.TypeInt32, bsoncore.AppendInt32(nil, 1)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, 1.5)),
		rv(bson.TypeInt64, bsoncore.AppendInt64(nil, 2)),
		rv(bson.TypeInt32, bsoncore.AppendInt32(nil, 128)),
		rv(bson.TypeInt64, bsoncore.AppendInt64(nil, math.MaxInt64)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, 1e300)),
		rv(bson.TypeDouble, bsoncore.AppendDouble(nil, math.Inf(1))),
	}
	var prev []byte
	for i, v := range vals {
		ks, err := appendKSValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && compareKS(prev, ks) >= 0 {
			t.Errorf("%v (% X) does not sort after %v (% X)", v, ks, vals[i-1], prev)
		}
		prev = ks
	}
	one32, _ := appendKSValue(nil, rv(bson.TypeInt32, bsoncore.AppendInt32(nil, 1)))
	oneF, _ := appendKSValue(nil, rv(bson.TypeDouble, bsoncore.AppendDouble(nil, 1)))
	if string(one32) != string(oneF) {
		t.Errorf("1 and 1.0 encode differently: % X vs % X", one32, oneF)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestParseTokenErrors(t *testing.T) {
	doc := func(d bson.D) bson.RawValue {
		return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: mustDoc(t, d)}
	}
	tests := map[string]struct {
		in       bson.RawValue
		wantCode int32
		wantMsg  string
	}{
		"not a document":   {rv(bson.TypeString, bsoncore.AppendString(nil, "x")), mongoerr.TypeMismatch, "expected type 'object'"},
		"no _data":         {doc(bson.D{}), codeBadTokenData, "_data of missing"},
		"_data not str":    {doc(bson.D{{Key: "_data", Value: 1}}), codeBadTokenData, "got int"},
		"unknown field":    {doc(bson.D{{Key: "_data", Value: realHWMToken}, {Key: "x", Value: 1}}), codeBadTokenField, "'x'"},
		"bad _typeBits":    {doc(bson.D{{Key: "_data", Value: realHWMToken}, {Key: "_typeBits", Value: 1}}), codeBadTokenTypeBits, "_typeBits"},
		"not hex":          {doc(bson.D{{Key: "_data", Value: "XYZ"}}), mongoerr.FailedToParse, "not a valid hex"},
		"empty":            {doc(bson.D{{Key: "_data", Value: ""}}), mongoerr.FailedToParse, "not a valid hex"},
		"truncated":        {doc(bson.D{{Key: "_data", Value: realInsertToken[:60]}}), mongoerr.FailedToParse, "Bad resume token"},
		"trailing bytes":   {doc(bson.D{{Key: "_data", Value: realHWMToken + "00"}}), mongoerr.FailedToParse, "after its end"},
		"no timestamp":     {doc(bson.D{{Key: "_data", Value: "2B04"}}), mongoerr.FailedToParse, "cluster time"},
		"version 3":        {doc(bson.D{{Key: "_data", Value: "8267C867A3000000012B0629296E1404"}}), mongoerr.FailedToParse, "version 3"},
		"unknown type":     {doc(bson.D{{Key: "_data", Value: "8267C867A3000000012B042B0A296E1404"}}), mongoerr.FailedToParse, "type 5"},
		"event without id": {doc(bson.D{{Key: "_data", Value: "8267C867A3000000012B042C0100296E1404"}}), mongoerr.FailedToParse, "no event identifier"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseToken("resumeAfter", tc.in)
			e, ok := mongoerr.As(err)
			if !ok {
				t.Fatalf("got %v, want a MongoDB error %d", err, tc.wantCode)
			}
			if e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
				t.Errorf("got %d %q, want %d containing %q", e.Code, e.Message, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func FuzzDecodeKeyString(f *testing.F) {
	for _, s := range []string{realInsertToken, realHWMToken, "82", "8267C867A3000000012B0429296E145000000004"} {
		b, _ := hex.DecodeString(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := DecodeKeyString(b)
		if err != nil {
			return
		}
		// Whatever decodes must encode again without error.
		if _, err := tok.KeyString(); err != nil {
			t.Fatalf("decoded token does not re-encode: %v", err)
		}
	})
}
