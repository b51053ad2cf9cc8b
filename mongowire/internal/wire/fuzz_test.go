package wire

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzParseHeader: no input may panic, and an accepted header's length is
// always within bounds. Seeds live in testdata/fuzz/FuzzParseHeader.
func FuzzParseHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err == nil && (h.Length < HeaderLen || h.Length > MaxMessageLen) {
			t.Fatalf("accepted length %d", h.Length)
		}
	})
}

// FuzzParseMsg: no input may panic; an accepted command is valid BSON
// within the depth limit, and decodes. Seeds live in testdata/fuzz/FuzzParseMsg.
func FuzzParseMsg(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < HeaderLen {
			return
		}
		m, err := ParseMsg(b, MaxCommandDepth)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not a *wire.Error", err)
			}
			return
		}
		if err := CheckDocument(m.Command, MaxCommandDepth); err != nil {
			t.Fatalf("accepted command is invalid: %v", err)
		}
		var d bson.D
		if err := bson.Unmarshal(m.Command, &d); err != nil {
			t.Fatalf("accepted command does not decode: %v", err)
		}
	})
}

// FuzzCheckDocument: CheckDocument never panics, and whatever it accepts
// the driver's decoder reads without error.
func FuzzCheckDocument(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckDocument(b, 20) != nil {
			return
		}
		if err := bson.Raw(b).Validate(); err != nil {
			t.Fatalf("CheckDocument accepted what bson rejects: %v", err)
		}
	})
}
