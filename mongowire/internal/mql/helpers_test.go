package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// doc parses relaxed extended JSON into a document.
func doc(t testing.TB, s string) bson.Raw {
	t.Helper()
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	return d
}

// val parses relaxed extended JSON holding one value: {"v": <value>}.
func val(t testing.TB, s string) bson.RawValue {
	t.Helper()
	return doc(t, `{"v": `+s+`}`).Lookup("v")
}

func docs(t testing.TB, ss ...string) []bson.Raw {
	out := make([]bson.Raw, len(ss))
	for i, s := range ss {
		out[i] = doc(t, s)
	}
	return out
}

// wantCode checks that err is a *mongoerr.Error with the code.
func wantCode(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %d", code)
	}
	e, ok := mongoerr.As(err)
	if !ok {
		t.Fatalf("got %T %v, want *mongoerr.Error", err, err)
	}
	if e.Code != code {
		t.Fatalf("got code %d (%s), want %d", e.Code, e.Message, code)
	}
	if msg != "" && e.Message != msg {
		t.Fatalf("got message %q, want %q", e.Message, msg)
	}
}

// sameDoc compares documents as extended JSON.
func sameDoc(t *testing.T, got bson.Raw, want string) {
	t.Helper()
	w := doc(t, want)
	if got.String() != w.String() {
		t.Fatalf("got  %s\nwant %s", got, w)
	}
}

func marshalD(d bson.D) (bson.Raw, error) { return bson.Marshal(d) }
