package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func mustDoc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// msgBytes builds an OP_MSG from flags and raw sections.
func msgBytes(flags uint32, sections ...[]byte) []byte {
	b := make([]byte, HeaderLen, 64)
	binary.LittleEndian.PutUint32(b[4:], 7)
	binary.LittleEndian.PutUint32(b[12:], uint32(OpMsg))
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, s := range sections {
		b = append(b, s...)
	}
	if flags&FlagChecksumPresent != 0 {
		binary.LittleEndian.PutUint32(b, uint32(len(b)+4))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func kind0(doc []byte) []byte { return append([]byte{0}, doc...) }

func kind1(id string, docs ...[]byte) []byte {
	b := []byte{1, 0, 0, 0, 0}
	b = append(b, id...)
	b = append(b, 0)
	for _, d := range docs {
		b = append(b, d...)
	}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(b)-1))
	return b
}

func nested(depth int) []byte {
	var v any = bson.D{{Key: "x", Value: 1}}
	for range depth - 1 {
		v = bson.D{{Key: "a", Value: v}}
	}
	b, _ := bson.Marshal(v)
	return b
}

func TestParseHeader(t *testing.T) {
	tests := map[string]struct {
		length  int32
		wantErr string
	}{
		"minimum":   {length: 16},
		"maximum":   {length: MaxMessageLen},
		"too short": {length: 15, wantErr: "message length 15 is outside"},
		"negative":  {length: -1, wantErr: "message length -1 is outside"},
		"too long":  {length: MaxMessageLen + 1, wantErr: "outside 16..48000000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, 16)
			binary.LittleEndian.PutUint32(b, uint32(tc.length))
			binary.LittleEndian.PutUint32(b[12:], uint32(OpMsg))
			h, err := ParseHeader(b)
			if tc.wantErr == "" {
				if err != nil || h.Length != tc.length || h.OpCode != OpMsg {
					t.Fatalf("ParseHeader = %+v, %v", h, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseHeader error = %v, want %q", err, tc.wantErr)
			}
			if !err.(*Error).Close {
				t.Error("a bad length must close the connection")
			}
		})
	}
}

func TestParseMsg(t *testing.T) {
	insert := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	d1 := mustDoc(t, bson.D{{Key: "_id", Value: 1}})
	d2 := mustDoc(t, bson.D{{Key: "_id", Value: 2}})
	withDocs := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{}}})

	tests := map[string]struct {
		msg       []byte
		want      bson.D // the merged command, when no error
		wantCode  int32
		wantClose bool
		wantErr   string
	}{
		"kind 0 only": {
			msg:  msgBytes(0, kind0(insert)),
			want: bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}},
		},
		"sequence merged": {
			msg: msgBytes(0, kind1("documents", d1, d2), kind0(insert)),
			want: bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"},
				{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: int32(2)}}}}},
		},
		"empty sequence": {
			msg:  msgBytes(0, kind0(insert), kind1("documents")),
			want: bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}, {Key: "documents", Value: bson.A{}}},
		},
		"valid checksum": {
			msg:  msgBytes(FlagChecksumPresent, kind0(insert)),
			want: bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}},
		},
		"exhaustAllowed ignored": {
			msg:  msgBytes(FlagExhaustAllowed, kind0(insert)),
			want: bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}},
		},
		"bad checksum": {
			msg: func() []byte {
				b := msgBytes(FlagChecksumPresent, kind0(insert))
				b[len(b)-1] ^= 0xff
				return b
			}(),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: "checksum mismatch",
		},
		"unknown required flag": {
			msg:      msgBytes(1<<5, kind0(insert)),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: "unknown required flag bits 0x20",
		},
		"no kind 0": {
			msg:      msgBytes(0, kind1("documents", d1)),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: "no kind-0 section",
		},
		"two kind 0": {
			msg:      msgBytes(0, kind0(insert), kind0(insert)),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: "more than one kind-0",
		},
		"unknown kind": {
			msg:      msgBytes(0, kind0(insert), []byte{2, 0, 0, 0, 0}),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: "unknown kind 2",
		},
		"duplicate sequence": {
			msg:      msgBytes(0, kind0(insert), kind1("documents", d1), kind1("documents", d2)),
			wantCode: mongoerr.BadValue, wantClose: true, wantErr: `two kind-1 sections named "documents"`,
		},
		"field in body and sequence": {
			msg:      msgBytes(0, kind0(withDocs), kind1("documents", d1)),
			wantCode: mongoerr.BadValue, wantErr: `field "documents" is given both`,
		},
		"sequence size too big": {
			msg:      msgBytes(0, kind0(insert), []byte{1, 0xff, 0, 0, 0, 'x', 0}),
			wantCode: mongoerr.InvalidLength, wantClose: true, wantErr: "kind-1 section size 255",
		},
		"truncated document": {
			msg:      msgBytes(0, kind0(insert[:len(insert)-3])),
			wantCode: mongoerr.InvalidBSON, wantClose: true, wantErr: "document length",
		},
		"malformed element": {
			msg: func() []byte {
				d := bytes.Clone(insert)
				d[4] = 0x42 // unknown type
				return msgBytes(0, kind0(d))
			}(),
			wantCode: mongoerr.InvalidBSON, wantErr: "unknown element type",
		},
		"too deep": {
			msg:      msgBytes(0, kind0(nested(MaxCommandDepth+1))),
			wantCode: mongoerr.Overflow, wantErr: "BSONObj exceeds maximum nested object depth",
		},
		"too deep in a sequence": {
			msg:      msgBytes(0, kind0(insert), kind1("documents", nested(MaxCommandDepth-1))),
			wantCode: mongoerr.Overflow, wantErr: "maximum nested object depth",
		},
		"no flags": {
			msg:      msgBytes(0)[:HeaderLen],
			wantCode: mongoerr.InvalidLength, wantClose: true, wantErr: "no flag bits",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := ParseMsg(tc.msg, MaxCommandDepth)
			if tc.wantErr != "" {
				var we *Error
				if err == nil {
					t.Fatalf("ParseMsg = %v, want error %q", m.Command, tc.wantErr)
				}
				we = err.(*Error)
				if !strings.Contains(we.Error(), tc.wantErr) || we.Err.Code != tc.wantCode || we.Close != tc.wantClose {
					t.Fatalf("ParseMsg error = %v (close %v), want code %d %q (close %v)", we, we.Close, tc.wantCode, tc.wantErr, tc.wantClose)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckDocument(m.Command, MaxCommandDepth); err != nil {
				t.Fatalf("merged command is not valid BSON: %v", err)
			}
			if want := mustDoc(t, tc.want); !bytes.Equal(m.Command, want) {
				t.Fatalf("command = %v, want %v", m.Command, bson.Raw(want))
			}
		})
	}
}

func TestCheckDocumentDepth(t *testing.T) {
	if err := CheckDocument(nested(100), 100); err != nil {
		t.Fatalf("depth 100 at limit 100: %v", err)
	}
	err := CheckDocument(nested(101), 100)
	if e, ok := mongoerr.As(err); !ok || e.Code != mongoerr.Overflow {
		t.Fatalf("depth 101 at limit 100: %v, want Overflow", err)
	}
	// Deep arrays are counted too.
	var v any = bson.A{1}
	for range 10 {
		v = bson.A{v}
	}
	if err := CheckDocument(mustDoc(t, bson.D{{Key: "a", Value: v}}), 5); err == nil {
		t.Fatal("deep arrays passed a depth limit of 5")
	}
}

func TestCheckDocumentTypes(t *testing.T) {
	doc := bson.D{
		{Key: "double", Value: 1.5}, {Key: "string", Value: "s"}, {Key: "doc", Value: bson.D{{Key: "a", Value: 1}}},
		{Key: "array", Value: bson.A{1, "x"}}, {Key: "bin", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}},
		{Key: "undef", Value: bson.Undefined{}}, {Key: "oid", Value: bson.NewObjectID()}, {Key: "bool", Value: true},
		{Key: "date", Value: bson.DateTime(5)}, {Key: "null", Value: nil}, {Key: "regex", Value: bson.Regex{Pattern: "a", Options: "i"}},
		{Key: "dbptr", Value: bson.DBPointer{DB: "d", Pointer: bson.NewObjectID()}}, {Key: "js", Value: bson.JavaScript("f()")},
		{Key: "sym", Value: bson.Symbol("s")}, {Key: "cws", Value: bson.CodeWithScope{Code: "f", Scope: bson.D{{Key: "x", Value: 1}}}},
		{Key: "int32", Value: int32(1)}, {Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "int64", Value: int64(3)},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	}
	b := mustDoc(t, doc)
	if err := CheckDocument(b, 10); err != nil {
		t.Fatalf("every BSON type: %v", err)
	}
	// Every truncation of a valid document, with its length patched, must be refused.
	for i := 5; i < len(b); i++ {
		c := bytes.Clone(b[:i])
		binary.LittleEndian.PutUint32(c, uint32(len(c)))
		if err := CheckDocument(c, 10); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
}

func TestParseQuery(t *testing.T) {
	q := mustDoc(t, bson.D{{Key: "isMaster", Value: 1}})
	b := make([]byte, HeaderLen)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, "admin.$cmd\x00"...)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, ^uint32(0))
	b = append(b, q...)
	got, err := ParseQuery(b, MaxCommandDepth)
	if err != nil {
		t.Fatal(err)
	}
	if got.Collection != "admin.$cmd" || got.Return != -1 || !bytes.Equal(got.Query, q) {
		t.Fatalf("ParseQuery = %+v", got)
	}
	if _, err := ParseQuery(append(b, 1, 2, 3), MaxCommandDepth); err == nil {
		t.Fatal("trailing garbage accepted")
	}
	if _, err := ParseQuery(b[:HeaderLen+6], MaxCommandDepth); err == nil {
		t.Fatal("truncated query accepted")
	}
}

func TestAppendReplies(t *testing.T) {
	doc := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}})
	m := AppendMsg(nil, 5, 7, doc)
	h, err := ParseHeader(m)
	if err != nil || int(h.Length) != len(m) || h.RequestID != 5 || h.ResponseTo != 7 || h.OpCode != OpMsg {
		t.Fatalf("AppendMsg header = %+v, %v", h, err)
	}
	// A reply is itself a valid OP_MSG.
	got, err := ParseMsg(m, MaxCommandDepth)
	if err != nil || !bytes.Equal(got.Command, doc) {
		t.Fatalf("reparse reply: %v, %v", got.Command, err)
	}
	r := AppendReply(nil, 1, 2, 0, doc)
	if int(binary.LittleEndian.Uint32(r)) != len(r) || len(r) != HeaderLen+20+len(doc) {
		t.Fatalf("AppendReply length = %d", len(r))
	}
	if n := binary.LittleEndian.Uint32(r[HeaderLen+16:]); n != 1 {
		t.Fatalf("numberReturned = %d", n)
	}
}
