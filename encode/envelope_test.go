package encode

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
)

func TestEnvelope(t *testing.T) {
	key := mustMarshal(t, bson.D{{Key: "_id", Value: int32(7)}})
	doc := mustMarshal(t, bson.D{{Key: "_id", Value: int32(7)}, {Key: "n", Value: 1.5}, {Key: "at", Value: bson.DateTime(0)}})
	before := mustMarshal(t, bson.D{{Key: "_id", Value: int32(7)}, {Key: "n", Value: 1.0}})
	update := mustMarshal(t, bson.D{{Key: "updatedFields", Value: bson.D{{Key: "n", Value: 1.5}}}, {Key: "removedFields", Value: bson.A{}}})
	extra := mustMarshal(t, bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c2"}}}})
	token := mustMarshal(t, bson.D{{Key: "_data", Value: "8265A1"}})
	tests := map[string]struct {
		ev        cdc.Event
		canonical bool
		want      string
	}{
		"insert": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", ClusterTime: cdc.Timestamp{T: 1700000000, I: 3}, WallTimeMS: 1700000000123,
				DocumentKey: key, FullDocument: doc, ResumeToken: token},
			want: `{"_namespace":"db.c","_op":"insert","_document_key":{"_id":7},"_cluster_time_s":1700000000,"_cluster_time_i":3,"_wall_time_ms":1700000000123,` +
				`"_full_document":{"_id":7,"n":1.5,"at":{"$date":"1970-01-01T00:00:00Z"}},"_update_desc":null,"_resume_token":{"_data":"8265A1"}}`,
		},
		"insert canonical": {
			ev:        cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", DocumentKey: key, FullDocument: doc},
			canonical: true,
			want: `{"_namespace":"db.c","_op":"insert","_document_key":{"_id":{"$numberInt":"7"}},"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":{"_id":{"$numberInt":"7"},"n":{"$numberDouble":"1.5"},"at":{"$date":{"$numberLong":"0"}}},"_update_desc":null,"_resume_token":null}`,
		},
		"update with pre-image": {
			ev: cdc.Event{Op: cdc.OpUpdate, Namespace: "db.c", DocumentKey: key, FullDocument: doc, PreImage: before, UpdateDesc: update, ResumeToken: token},
			want: `{"_namespace":"db.c","_op":"update","_document_key":{"_id":7},"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":{"_id":7,"n":1.5,"at":{"$date":"1970-01-01T00:00:00Z"}},"_before":{"_id":7,"n":1.0},` +
				`"_update_desc":{"updatedFields":{"n":1.5},"removedFields":[]},"_resume_token":{"_data":"8265A1"}}`,
		},
		"delete": {
			ev: cdc.Event{Op: cdc.OpDelete, Namespace: "db.c", DocumentKey: key},
			want: `{"_namespace":"db.c","_op":"delete","_document_key":{"_id":7},"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":null,"_update_desc":null,"_resume_token":null}`,
		},
		"rename with extra": {
			ev: cdc.Event{Op: cdc.OpRename, Namespace: "d.c", Extra: extra, ResumeToken: token},
			want: `{"_namespace":"d.c","_op":"rename","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":null,"_update_desc":null,"_extra":{"to":{"db":"d","coll":"c2"}},"_resume_token":{"_data":"8265A1"}}`,
		},
		"empty pre-image is null": {
			ev: cdc.Event{Op: cdc.OpUpdate, Namespace: "d.c", PreImage: []byte{}},
			want: `{"_namespace":"d.c","_op":"update","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":null,"_before":null,"_update_desc":null,"_resume_token":null}`,
		},
		"message json with headers": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "orders.new", PayloadFormat: cdc.PayloadJSON, Payload: []byte("{\n  \"a\": [1,\r\n 2]\n}"),
				Headers: map[string][]string{"Nats-Msg-Id": {"m1"}, "B": {"x", "y\"z"}, "a": nil}},
			want: `{"_namespace":"orders.new","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":{   "a": [1,   2] },"_update_desc":null,"_headers":{"B":["x","y\"z"],"Nats-Msg-Id":["m1"],"a":[]},"_resume_token":null}`,
		},
		"message empty json": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "s", PayloadFormat: cdc.PayloadJSON},
			want: `{"_namespace":"s","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":null,"_update_desc":null,"_resume_token":null}`,
		},
		"message string": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "s", PayloadFormat: cdc.PayloadString, Payload: []byte("line 1\nsaid \"hi\"\xff")},
			want: `{"_namespace":"s","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":"line 1\nsaid \"hi\"\ufffd","_update_desc":null,"_resume_token":null}`,
		},
		"message base64": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "s", PayloadFormat: cdc.PayloadBase64, Payload: []byte{0, 1, 2, 0xff}},
			want: `{"_namespace":"s","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":"AAEC/w==","_update_desc":null,"_resume_token":null}`,
		},
		"escaped namespace": {
			ev: cdc.Event{Op: cdc.OpInsert, Namespace: "sub.\"q\"\n"},
			want: `{"_namespace":"sub.\"q\"\n","_op":"insert","_document_key":null,"_cluster_time_s":0,"_cluster_time_i":0,"_wall_time_ms":0,` +
				`"_full_document":null,"_update_desc":null,"_resume_token":null}`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := Envelope
			if tt.canonical {
				f = CanonicalEnvelope
			}
			got, err := f([]byte("prev\n"), &tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prev\n"+tt.want {
				t.Fatalf("\n got %s\nwant prev\n%s", got, tt.want)
			}
			line := got[len("prev\n"):]
			if !json.Valid(line) {
				t.Errorf("not valid JSON: %s", line)
			}
			if bytes.ContainsAny(line, "\r\n") {
				t.Errorf("record spans lines: %q", line)
			}
		})
	}
}

func TestEnvelopeErrors(t *testing.T) {
	broken := []byte{8, 0, 0, 0, 0x08, 'b', 0, 0} // boolean without its byte
	tests := map[string]struct {
		ev   *cdc.Event
		want string
	}{
		"nil event":          {nil, "encode: nil event"},
		"bad document key":   {&cdc.Event{Op: cdc.OpDelete, Namespace: "db.c", DocumentKey: broken}, "encode _document_key of delete event on db.c: encode: malformed BSON at offset 7: boolean needs 1 bytes"},
		"bad full document":  {&cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", FullDocument: []byte{1, 2}}, "encode _full_document of insert event on db.c: encode: malformed BSON at offset 0"},
		"bad pre-image":      {&cdc.Event{Op: cdc.OpUpdate, Namespace: "db.c", PreImage: broken}, "encode _before of update event"},
		"bad update":         {&cdc.Event{Op: cdc.OpUpdate, Namespace: "db.c", UpdateDesc: broken}, "encode _update_desc of update event"},
		"bad extra":          {&cdc.Event{Op: cdc.OpRename, Namespace: "db.c", Extra: broken}, "encode _extra of rename event"},
		"bad resume token":   {&cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", ResumeToken: broken}, "encode _resume_token of insert event"},
		"unknown payload":    {&cdc.Event{Op: cdc.OpInsert, Namespace: "subj", PayloadFormat: 9, Payload: []byte("x")}, "encode insert event on subj: unknown payload format 9"},
		"too deep full doc":  {&cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", FullDocument: nest(mustMarshal(t, bson.D{}), MaxDepth, false)}, "encode _full_document of insert event on db.c: encode: BSON nested too deeply"},
		"bad doc after good": {&cdc.Event{Op: cdc.OpInsert, Namespace: "db.c", DocumentKey: mustMarshal(t, bson.D{{Key: "_id", Value: 1}}), ResumeToken: broken}, "_resume_token"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, f := range []func([]byte, *cdc.Event) ([]byte, error){Envelope, CanonicalEnvelope} {
				got, err := f([]byte("keep"), tt.ev)
				if err == nil {
					t.Fatalf("no error; wrote %s", got)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q does not contain %q", err, tt.want)
				}
				if string(got) != "keep" {
					t.Errorf("dst changed to %q on error", got)
				}
			}
		})
	}
	_, err := Envelope(nil, &cdc.Event{Op: cdc.OpInsert, FullDocument: []byte{1}})
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("error %v does not wrap ErrMalformed", err)
	}
}

func TestEnvelopeMarker(t *testing.T) {
	got, err := Envelope([]byte("keep"), &cdc.Event{Op: cdc.OpMarker, Pos: cdc.Position(`"x"`)})
	if err != nil || string(got) != "keep" {
		t.Fatalf("marker: got %q, %v; want nothing appended", got, err)
	}
}

// TestEnvelopeRealistic checks the envelope of benchmark-sized change
// events against the driver's Extended JSON of each document.
func TestEnvelopeRealistic(t *testing.T) {
	for _, size := range []int{512, 4096} {
		ev := changeEvent(t, size)
		got, err := Envelope(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := driverEnvelope(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("size %d:\n got %s\nwant %s", size, got, want)
		}
		var decoded map[string]any
		if err := json.Unmarshal(got, &decoded); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if decoded["_full_document"].(map[string]any)["name"] != "Ada Lovelace" {
			t.Errorf("size %d: full document not decoded: %v", size, decoded["_full_document"])
		}
	}
}

func TestEnvelopeAllocations(t *testing.T) {
	ev := changeEvent(t, 4096)
	ev.Headers = map[string][]string{"a": {"1"}, "b": {"2"}}
	dst := make([]byte, 0, 64<<10)
	n := testing.AllocsPerRun(100, func() {
		if _, err := Envelope(dst[:0], &ev); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per event with a reused buffer, want 0", n)
	}
}

// driverEnvelope is the envelope built with the driver's Extended JSON
// writer, for comparison in tests and benchmarks.
func driverEnvelope(dst []byte, ev *cdc.Event) ([]byte, error) {
	doc := func(dst []byte, b []byte) ([]byte, error) {
		if b == nil {
			return append(dst, "null"...), nil
		}
		j, err := bson.MarshalExtJSON(bson.Raw(b), false, false)
		return append(dst, j...), err
	}
	var err error
	dst = append(dst, `{"_namespace":`...)
	dst = AppendString(dst, ev.Namespace)
	dst = append(dst, `,"_op":`...)
	dst = AppendString(dst, string(ev.Op))
	dst = append(dst, `,"_document_key":`...)
	if dst, err = doc(dst, ev.DocumentKey); err != nil {
		return nil, err
	}
	dst = append(dst, `,"_cluster_time_s":`...)
	dst = append(dst, []byte(jsonNumber(int64(ev.ClusterTime.T)))...)
	dst = append(dst, `,"_cluster_time_i":`...)
	dst = append(dst, []byte(jsonNumber(int64(ev.ClusterTime.I)))...)
	dst = append(dst, `,"_wall_time_ms":`...)
	dst = append(dst, []byte(jsonNumber(ev.WallTimeMS))...)
	dst = append(dst, `,"_full_document":`...)
	if dst, err = doc(dst, ev.FullDocument); err != nil {
		return nil, err
	}
	dst = append(dst, `,"_update_desc":`...)
	if dst, err = doc(dst, ev.UpdateDesc); err != nil {
		return nil, err
	}
	dst = append(dst, `,"_resume_token":`...)
	if dst, err = doc(dst, ev.ResumeToken); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
