package sinkcheckpoint

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// A checkpoint round-trips, positions and sink states that are not JSON
// included; the stored form of a JSON position is unchanged, so rows and
// documents written before stay readable.
func TestMarshalRoundTrip(t *testing.T) {
	for name, cp := range map[string]cdc.Checkpoint{
		"json":     {Source: cdc.Position(`{"ts":1}`), Sink: []byte(`{"len":3}`), Meta: map[string]string{"k": "v"}},
		"not json": {Source: cdc.Position("opaque:1"), Sink: []byte("raw state")},
		"empty":    {},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Marshal(cp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unmarshal(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, cp) {
				t.Fatalf("round trip of %+v gave %+v (stored %s)", cp, *got, b)
			}
		})
	}
	b, _ := Marshal(cdc.Checkpoint{Source: cdc.Position(`{"ts":1}`)})
	if string(b) != `{"source":{"ts":1}}` {
		t.Fatalf("stored form %s", b)
	}
	if _, err := Unmarshal([]byte("{")); err == nil {
		t.Fatal("a torn record decoded")
	}
}

// Save finds a committed checkpoint once, forgetting older ones; one
// never committed, or already saved, is not found; the ledger keeps the
// newest maxPending.
func TestLedger(t *testing.T) {
	var l Ledger
	cp := func(i int) cdc.Checkpoint { return cdc.Checkpoint{Source: cdc.Position(fmt.Sprint(i))} }
	for i := range maxPending + 2 {
		b, _ := Marshal(cp(i))
		l.Committed(b)
	}
	for _, tc := range []struct {
		i  int
		ok bool
	}{{0, false}, {1, false}, {5, true}, {3, false}, {5, false}, {maxPending + 1, true}, {99, false}} {
		if ok, err := l.Saved(cp(tc.i)); err != nil || ok != tc.ok {
			t.Fatalf("Saved(%d) = %v, %v; want %v", tc.i, ok, err, tc.ok)
		}
	}
}
