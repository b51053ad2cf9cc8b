package mongowire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// rawMsg builds an OP_MSG from flag bits and raw section bytes, with a
// correct message length.
func rawMsg(flags uint32, sections ...[]byte) []byte {
	b := make([]byte, 16, 64)
	binary.LittleEndian.PutUint32(b[4:], 1)
	binary.LittleEndian.PutUint32(b[12:], 2013)
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, s := range sections {
		b = append(b, s...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func kind0(doc []byte) []byte { return append([]byte{0}, doc...) }

// kind1 builds a document sequence; size -1 means the correct size.
func kind1(size int32, id string, docs ...[]byte) []byte {
	body := append([]byte(id), 0)
	for _, d := range docs {
		body = append(body, d...)
	}
	if size == -1 {
		size = int32(4 + len(body))
	}
	b := []byte{1}
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	return append(b, body...)
}

// TestHostileSections sends OP_MSG messages whose sections lie about
// their sizes or structure: each gets an error reply naming the problem,
// and the connection then either still answers a ping or is closed — it
// never hangs and the server never crashes.
func TestHostileSections(t *testing.T) {
	s := startServer(t)
	insert := marshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	doc := marshal(t, bson.D{{Key: "_id", Value: 1}})
	withLen := func(d []byte, n uint32) []byte {
		d = bytes.Clone(d)
		binary.LittleEndian.PutUint32(d, n)
		return d
	}
	tests := map[string]struct {
		msg    []byte
		code   int32
		errmsg string
	}{
		"no sections":             {rawMsg(0), mongoerr.BadValue, "no kind-0 section"},
		"only a sequence":         {rawMsg(0, kind1(-1, "documents", doc)), mongoerr.BadValue, "no kind-0 section"},
		"two kind-0 sections":     {rawMsg(0, kind0(marshal(t, ping)), kind0(marshal(t, ping))), mongoerr.BadValue, "more than one kind-0"},
		"sequence doc too long":   {rawMsg(0, kind0(insert), kind1(-1, "documents", withLen(doc, 1000))), mongoerr.InvalidBSON, "document length 1000"},
		"sequence doc negative":   {rawMsg(0, kind0(insert), kind1(-1, "documents", withLen(doc, math.MaxUint32))), mongoerr.InvalidBSON, "document length -1"},
		"sequence size negative":  {rawMsg(0, kind0(insert), kind1(-5, "documents", doc)), mongoerr.InvalidLength, "section size -5"},
		"sequence size past end":  {rawMsg(0, kind0(insert), kind1(1<<30, "documents", doc)), mongoerr.InvalidLength, "section size 1073741824"},
		"sequence size too small": {rawMsg(0, kind0(insert), kind1(3, "documents", doc)), mongoerr.InvalidLength, "section size 3"},
		"identifier unterminated": {rawMsg(0, kind0(insert), []byte{1, 8, 0, 0, 0, 'a', 'b', 'c'}), mongoerr.InvalidLength, "section size 8"},
		"sequence named twice":    {rawMsg(0, kind0(insert), kind1(-1, "documents", doc), kind1(-1, "documents", doc)), mongoerr.BadValue, `two kind-1 sections named "documents"`},
		"field in body and seq":   {rawMsg(0, kind0(marshal(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{}}, {Key: "$db", Value: "d"}})), kind1(-1, "documents", doc)), mongoerr.BadValue, "both in the command body and as a document sequence"},
		"empty sequence":          {rawMsg(0, kind0(insert), kind1(-1, "documents")), mongoerr.InvalidLength, "Write batch sizes must be between 1 and 100000. Got 0 operations."},
		"command truncated":       {rawMsg(0, kind0(marshal(t, ping)[:8])), mongoerr.InvalidBSON, "document length"},
		"command length negative": {rawMsg(0, kind0(withLen(doc, math.MaxUint32))), mongoerr.InvalidBSON, "document length -1"},
		"empty command":           {rawMsg(0, kind0([]byte{5, 0, 0, 0, 0})), mongoerr.FailedToParse, "command document is empty"},
		"trailing byte":           {rawMsg(0, kind0(marshal(t, ping)), []byte{0}), mongoerr.InvalidBSON, "truncated"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nc := dial(t, s)
			if _, err := nc.Write(tc.msg); err != nil {
				t.Fatal(err)
			}
			_, reply := readReply(t, nc)
			wantError(t, reply, tc.code, tc.errmsg)
			if _, err := nc.Write(opMsg(2, 0, marshal(t, ping))); err != nil {
				return // closed: fine
			}
			var hdr [16]byte
			if _, err := io.ReadFull(nc, hdr[:]); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("connection hangs after the error")
				}
				return // closed after the error reply: fine
			}
		})
	}
}
