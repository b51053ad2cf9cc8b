package encode

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

// FuzzAppendRelaxed feeds arbitrary bytes to both writers. They must never
// panic, must reject what the driver rejects, and, where the driver accepts
// the document, must write exactly what it writes. The one deliberate
// difference is the nesting limit: the driver has none.
// Seeds live in testdata/fuzz/FuzzAppendRelaxed.
func FuzzAppendRelaxed(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, canonical := range []bool{false, true} {
			var got []byte
			var err error
			if canonical {
				got, err = AppendCanonical(nil, data)
			} else {
				got, err = AppendRelaxed(nil, data)
			}
			want, derr := driverMarshal(data, canonical)
			switch {
			case err != nil && errors.Is(err, ErrTooDeep):
				// Deliberately stricter than the driver.
			case err != nil && !errors.Is(err, ErrMalformed):
				t.Fatalf("canonical=%v: error %v wraps neither ErrMalformed nor ErrTooDeep", canonical, err)
			case err != nil && derr == nil:
				t.Fatalf("canonical=%v: the driver accepts %x (%s) but we reject it: %v", canonical, data, want, err)
			case err == nil && derr != nil:
				t.Fatalf("canonical=%v: we accept %x (%s) but the driver rejects it: %v", canonical, data, got, derr)
			case err == nil && !bytes.Equal(got, want):
				t.Fatalf("canonical=%v: output differs for %x\n got %s\nwant %s", canonical, data, got, want)
			}
			if err != nil && len(got) != 0 {
				t.Fatalf("canonical=%v: error %v but dst grew to %q", canonical, err, got)
			}
		}
	})
}

// driverMarshal runs the driver's writer, turning a panic into an error,
// on data with every non-canonical decimal128 made the zero it is (see
// driverExtJSON).
func driverMarshal(data []byte, canonical bool) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, errors.New("driver panicked")
		}
	}()
	data = bytes.Clone(data)
	zeroNonCanonicalDecimals(data)
	return bson.MarshalExtJSON(bson.Raw(data), canonical, false)
}

// FuzzDebezium feeds arbitrary bytes to the Debezium encoder as an update's
// documents and update description. It must never panic, must fail only
// with an error wrapping ErrMalformed or ErrTooDeep (leaving dst as it
// was), and must otherwise write one valid JSON object.
func FuzzDebezium(f *testing.F) {
	f.Add([]byte{5, 0, 0, 0, 0}, []byte{5, 0, 0, 0, 0})
	f.Add(must(bson.Marshal(bson.D{{Key: "a", Value: "x\"\n"}})), must(bson.Marshal(bson.D{
		{Key: "updatedFields", Value: bson.D{{Key: "a", Value: int64(1)}}}, {Key: "removedFields", Value: bson.A{"b"}},
		{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "c"}, {Key: "newSize", Value: int32(0)}}}}})))
	enc := &Debezium{Name: "fuzz"}
	f.Fuzz(func(t *testing.T, doc, desc []byte) {
		ev := cdc.Event{Op: cdc.OpUpdate, Namespace: "d.c", FullDocument: doc, PreImage: doc, UpdateDesc: desc, Extra: desc}
		got, err := enc.Encode([]byte("keep"), &ev)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrTooDeep", err)
			}
			if string(got) != "keep" {
				t.Fatalf("error %v but dst is %q", err, got)
			}
			return
		}
		if !json.Valid(got[4:]) {
			t.Fatalf("not JSON: %s", got[4:])
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
