package encode

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/dbzconsumer"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixedNow is the processing time in every golden file.
func fixedNow() time.Time { return time.Unix(1700000001, 250_000_000) }

// dbzEvents are the change events of the golden tests, one per operation
// Debezium has a value for.
func dbzEvents(t testing.TB) map[string]cdc.Event {
	key := mustMarshal(t, bson.D{{Key: "_id", Value: int64(1004)}})
	doc := mustMarshal(t, bson.D{{Key: "_id", Value: int64(1004)}, {Key: "first_name", Value: "Anne Marie"},
		{Key: "email", Value: "annek@noanswer.org"}, {Key: "visits", Value: int32(3)}, {Key: "since", Value: bson.DateTime(1558965508000)}})
	before := mustMarshal(t, bson.D{{Key: "_id", Value: int64(1004)}, {Key: "first_name", Value: "Anne"},
		{Key: "email", Value: "annek@noanswer.org"}, {Key: "visits", Value: int32(2)}, {Key: "tags", Value: bson.A{"a", "b"}}})
	desc := mustMarshal(t, bson.D{
		{Key: "updatedFields", Value: bson.D{{Key: "first_name", Value: "Anne Marie"}, {Key: "visits", Value: int32(3)}}},
		{Key: "removedFields", Value: bson.A{"nickname"}},
		{Key: "truncatedArrays", Value: bson.A{bson.D{{Key: "field", Value: "tags"}, {Key: "newSize", Value: int32(1)}}}},
	})
	plainDesc := mustMarshal(t, bson.D{{Key: "updatedFields", Value: bson.D{{Key: "first_name", Value: "Anne Marie"}}}, {Key: "removedFields", Value: bson.A{}}})
	session := mustMarshal(t, bson.D{
		{Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{0xab}, 16)}}}},
		{Key: "txnNumber", Value: int64(1)},
	})
	ct := cdc.Timestamp{T: 1558965508, I: 31}
	const wall = 1558965508123
	return map[string]cdc.Event{
		"insert": {Op: cdc.OpInsert, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall, DocumentKey: key, FullDocument: doc},
		"update_full_document": {Op: cdc.OpUpdate, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall,
			DocumentKey: key, FullDocument: doc, PreImage: before, UpdateDesc: desc},
		"update_delta":  {Op: cdc.OpUpdate, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall, DocumentKey: key, UpdateDesc: plainDesc},
		"replace":       {Op: cdc.OpReplace, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall, DocumentKey: key, FullDocument: doc},
		"delete":        {Op: cdc.OpDelete, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall, DocumentKey: key, PreImage: before},
		"snapshot_read": {Op: cdc.OpSnapshot, Namespace: "inventory.customers", DocumentKey: key, FullDocument: doc},
		"transaction":   {Op: cdc.OpInsert, Namespace: "inventory.customers", ClusterTime: ct, WallTimeMS: wall, DocumentKey: key, FullDocument: doc, Extra: session},
	}
}

// TestDebeziumGolden compares the value written for each operation with
// testdata/debezium/<case>.json (go test -run TestDebeziumGolden -update
// rewrites them), and reads each back with the documented-field consumer.
func TestDebeziumGolden(t *testing.T) {
	enc := &Debezium{Name: "fulfillment", Now: fixedNow}
	wantOp := map[string]string{"insert": "c", "update_full_document": "u", "update_delta": "u", "replace": "u",
		"delete": "d", "snapshot_read": "r", "transaction": "c"}
	for name, ev := range dbzEvents(t) {
		t.Run(name, func(t *testing.T) {
			got, err := enc.Encode(nil, &ev)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "debezium", name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("%s:\n got %s\nwant %s", name, got, want)
			}
			dev, err := dbzconsumer.Parse(got)
			if err != nil {
				t.Fatalf("consumer: %v\n%s", err, got)
			}
			if dev.Op != wantOp[name] || dev.Source.DB != "inventory" || dev.Source.Collection != "customers" || dev.Source.Name != "fulfillment" {
				t.Errorf("consumer read op %q db %q collection %q name %q", dev.Op, dev.Source.DB, dev.Source.Collection, dev.Source.Name)
			}
			if dev.TsMS != 1700000001250 {
				t.Errorf("ts_ms = %d, want the processing time 1700000001250", dev.TsMS)
			}
			// The strings hold Extended JSON that the driver reads back to
			// the very documents.
			for _, d := range []struct {
				what string
				json string
				bson []byte
			}{{"after", dev.After, ev.FullDocument}, {"before", dev.Before, ev.PreImage}} {
				if d.what == "after" && ev.Op == cdc.OpDelete {
					continue
				}
				if (d.json == "") != (d.bson == nil) {
					t.Fatalf("%s = %q for a document of %d bytes", d.what, d.json, len(d.bson))
				}
				if d.json == "" {
					continue
				}
				var back bson.Raw
				if err := bson.UnmarshalExtJSON([]byte(d.json), false, &back); err != nil {
					t.Fatalf("%s does not read back: %v", d.what, err)
				}
				if !bytes.Equal(back, d.bson) {
					t.Errorf("%s reads back as %s, want %s", d.what, back, bson.Raw(d.bson))
				}
			}
		})
	}
}

// TestDebeziumSource checks the source block's fields from the event:
// cluster time as ts_ms and ord, the snapshot flag, the session of a
// transaction, and a snapshot read stamped with the processing time.
func TestDebeziumSource(t *testing.T) {
	enc := &Debezium{Name: "n", Now: fixedNow}
	evs := dbzEvents(t)
	for name, want := range map[string]dbzconsumer.Source{
		"insert":        {TsMS: 1558965508000, Ord: 31, Snapshot: "false"},
		"snapshot_read": {TsMS: 1700000001250, Ord: 0, Snapshot: "true"},
		"transaction":   {TsMS: 1558965508000, Ord: 31, Snapshot: "false"},
	} {
		ev := evs[name]
		out, err := enc.Encode(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := dbzconsumer.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		s := dev.Source
		if s.TsMS != want.TsMS || s.Ord != want.Ord || s.Snapshot != want.Snapshot || s.Version != DebeziumVersion {
			t.Errorf("%s: source %+v, want ts_ms %d ord %d snapshot %q", name, s, want.TsMS, want.Ord, want.Snapshot)
		}
		if name == "transaction" {
			if s.TxnNumber == nil || *s.TxnNumber != 1 || !strings.Contains(s.Lsid, `"$binary"`) {
				t.Errorf("transaction: lsid %q txnNumber %v", s.Lsid, s.TxnNumber)
			}
		} else if s.TxnNumber != nil || s.Lsid != "" {
			t.Errorf("%s: lsid %q txnNumber %v outside a transaction", name, s.Lsid, s.TxnNumber)
		}
		if name == "snapshot_read" && s.WallTime != nil {
			t.Errorf("snapshot read has wallTime %d", *s.WallTime)
		}
	}
}

// TestDebeziumNoValue: Debezium's MongoDB connector sends no value for
// collection operations and the end of a stream, so the encoder writes
// nothing for them, as for a marker.
func TestDebeziumNoValue(t *testing.T) {
	enc := &Debezium{Name: "n"}
	for _, op := range []cdc.Op{cdc.OpMarker, cdc.OpDrop, cdc.OpRename, cdc.OpDropDatabase, cdc.OpInvalidate,
		cdc.OpCreate, cdc.OpCreateIndex, cdc.OpDropIndex, cdc.OpModify} {
		out, err := enc.Encode([]byte("x"), &cdc.Event{Op: op, Namespace: "d.c"})
		if err != nil || string(out) != "x" {
			t.Errorf("%s: %q, %v; want nothing appended", op, out, err)
		}
	}
	// A re-snapshot's begin and end lines carry no document.
	frame := mustMarshal(t, bson.D{{Key: "resnapshot", Value: "begin"}})
	out, err := enc.Encode([]byte("x"), &cdc.Event{Op: cdc.OpSnapshot, Namespace: "d.c", Extra: frame})
	if err != nil || string(out) != "x" {
		t.Errorf("re-snapshot line: %q, %v; want nothing appended", out, err)
	}
}

func TestDebeziumErrors(t *testing.T) {
	enc := &Debezium{Name: "n"}
	good := mustMarshal(t, bson.D{{Key: "_id", Value: int32(1)}})
	bad := []byte{0x05, 0x00, 0x00, 0x00, 0x01} // no terminating NUL
	badDesc := mustMarshal(t, bson.D{{Key: "removedFields", Value: bson.A{int32(3)}}})
	for name, tc := range map[string]struct {
		ev   *cdc.Event
		want string
	}{
		"nil event":        {nil, "nil event"},
		"message":          {&cdc.Event{Op: cdc.OpInsert, Namespace: "subj", Payload: []byte(`{}`), PayloadFormat: cdc.PayloadJSON}, "message with a payload"},
		"malformed after":  {&cdc.Event{Op: cdc.OpInsert, Namespace: "d.c", FullDocument: bad}, "encode after of insert event on d.c"},
		"malformed before": {&cdc.Event{Op: cdc.OpUpdate, Namespace: "d.c", FullDocument: good, PreImage: bad}, "encode before of update event on d.c"},
		"removed field not a string": {&cdc.Event{Op: cdc.OpUpdate, Namespace: "d.c", UpdateDesc: badDesc},
			"updateDescription of update event on d.c: encode: malformed BSON: removedFields[0] is 32-bit integer"},
	} {
		out, err := enc.Encode([]byte("keep"), tc.ev)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", name, out)
		}
		if name != "nil event" && name != "message" && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v does not wrap ErrMalformed", name, err)
		}
	}
}

// TestDebeziumAppends: the encoder appends to what dst holds, and a value
// is the same whatever came before it.
func TestDebeziumAppends(t *testing.T) {
	enc := &Debezium{Name: "n", Now: fixedNow}
	ev := dbzEvents(t)["update_full_document"]
	one, err := enc.Encode(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	two, err := enc.Encode(append(make([]byte, 0, 8), "prefix"...), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if string(two) != "prefix"+string(one) || !json.Valid(one) {
		t.Errorf("appended %q, alone %q", two, one)
	}
}
