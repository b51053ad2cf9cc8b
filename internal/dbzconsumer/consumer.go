// Package dbzconsumer reads change event values the way a consumer
// written against Debezium's documentation of its MongoDB connector reads
// them: every documented field, its type and whether it is optional, and
// nothing else. Tide's tests run it over the debezium encoder's output;
// it imports nothing of Tide's, so that it checks the format rather than
// the encoder's idea of it.
package dbzconsumer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Event is a decoded change event value.
type Event struct {
	Op                string
	TsMS              int64
	Before, After     string // JSON text of the document, "" when null
	UpdateDescription *UpdateDescription
	Source            Source
}

// UpdateDescription is the value's updateDescription.
type UpdateDescription struct {
	RemovedFields   []string
	UpdatedFields   string // JSON text, "" when null
	TruncatedArrays []TruncatedArray
}

// TruncatedArray is one entry of updateDescription.truncatedArrays.
type TruncatedArray struct {
	Field string
	Size  int32
}

// Source is the value's source block (io.debezium.connector.mongo.Source).
type Source struct {
	Version, Connector, Name string
	TsMS                     int64
	Snapshot                 string
	DB, Collection           string
	Ord                      int32
	Lsid                     string
	TxnNumber                *int64
	WallTime                 *int64
}

// field kinds of Kafka Connect schemas, as JSON renders them.
type kind int

const (
	kString kind = iota
	kInt32
	kInt64
	kJSON // io.debezium.data.Json: a string holding a JSON object
	kStringArray
	kStruct
	kStructArray
)

type field struct {
	name     string
	kind     kind
	optional bool
	fields   []field // for kStruct and kStructArray
}

// The documented fields. Envelope: before, after, updateDescription,
// source, op, ts_ms, ts_us, ts_ns, transaction.
var (
	truncatedArray = []field{{"field", kString, false, nil}, {"size", kInt32, false, nil}}
	updateDesc     = []field{
		{"removedFields", kStringArray, true, nil},
		{"updatedFields", kJSON, true, nil},
		{"truncatedArrays", kStructArray, true, truncatedArray},
	}
	source = []field{
		{"version", kString, false, nil},
		{"connector", kString, false, nil},
		{"name", kString, false, nil},
		{"ts_ms", kInt64, false, nil},
		{"snapshot", kString, true, nil},
		{"db", kString, false, nil},
		{"sequence", kString, true, nil},
		{"ts_us", kInt64, true, nil},
		{"ts_ns", kInt64, true, nil},
		{"collection", kString, false, nil},
		{"ord", kInt32, false, nil},
		{"lsid", kJSON, true, nil},
		{"txnNumber", kInt64, true, nil},
		{"wallTime", kInt64, true, nil},
	}
	transaction = []field{
		{"id", kString, false, nil},
		{"total_order", kInt64, false, nil},
		{"data_collection_order", kInt64, false, nil},
	}
	envelope = []field{
		{"before", kJSON, true, nil},
		{"after", kJSON, true, nil},
		{"updateDescription", kStruct, true, updateDesc},
		{"source", kStruct, false, source},
		{"op", kString, false, nil},
		{"ts_ms", kInt64, true, nil},
		{"ts_us", kInt64, true, nil},
		{"ts_ns", kInt64, true, nil},
		{"transaction", kStruct, true, transaction},
	}
)

var snapshotValues = map[string]bool{"true": true, "first": true, "first_in_data_collection": true,
	"last_in_data_collection": true, "last": true, "false": true, "incremental": true}

// Parse decodes one change event value, checking every field against the
// documented list: required fields present and not null, each of its
// type, no field the documentation does not name, op one of c, u, d, r,
// and the document a create or read carries.
func Parse(line []byte) (*Event, error) {
	obj, err := check("", line, envelope)
	if err != nil {
		return nil, err
	}
	ev := &Event{}
	ev.Op = str(obj["op"])
	ev.TsMS = i64(obj["ts_ms"])
	ev.Before = str(obj["before"])
	ev.After = str(obj["after"])
	src := objOf(obj["source"])
	ev.Source = Source{
		Version: str(src["version"]), Connector: str(src["connector"]), Name: str(src["name"]),
		TsMS: i64(src["ts_ms"]), Snapshot: str(src["snapshot"]), DB: str(src["db"]), Collection: str(src["collection"]),
		Ord: int32(i64(src["ord"])), Lsid: str(src["lsid"]), TxnNumber: i64p(src["txnNumber"]), WallTime: i64p(src["wallTime"]),
	}
	if ud := obj["updateDescription"]; !isNull(ud) {
		u := objOf(ud)
		d := &UpdateDescription{UpdatedFields: str(u["updatedFields"])}
		if !isNull(u["removedFields"]) {
			json.Unmarshal(u["removedFields"], &d.RemovedFields)
		}
		if !isNull(u["truncatedArrays"]) {
			var ts []struct {
				Field string `json:"field"`
				Size  int32  `json:"size"`
			}
			json.Unmarshal(u["truncatedArrays"], &ts)
			for _, t := range ts {
				d.TruncatedArrays = append(d.TruncatedArrays, TruncatedArray(t))
			}
		}
		ev.UpdateDescription = d
	}
	switch ev.Op {
	case "c", "r":
		if ev.After == "" {
			return nil, fmt.Errorf("op %q without after", ev.Op)
		}
	case "u":
		if ev.After == "" && ev.UpdateDescription == nil {
			return nil, fmt.Errorf("op \"u\" with neither after nor updateDescription")
		}
	case "d":
		if ev.After != "" {
			return nil, fmt.Errorf("op \"d\" with an after")
		}
	default:
		return nil, fmt.Errorf("op %q is not one of c, u, d, r", ev.Op)
	}
	if ev.Source.Connector != "mongodb" {
		return nil, fmt.Errorf("source.connector %q is not mongodb", ev.Source.Connector)
	}
	if s := ev.Source.Snapshot; s != "" && !snapshotValues[s] {
		return nil, fmt.Errorf("source.snapshot %q is not a Debezium snapshot value", s)
	}
	return ev, nil
}

func check(path string, raw json.RawMessage, fields []field) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s: not a JSON object: %s", where(path), raw)
	}
	known := map[string]bool{}
	for _, f := range fields {
		known[f.name] = true
		p := f.name
		if path != "" {
			p = path + "." + f.name
		}
		v, ok := obj[f.name]
		if !ok || isNull(v) {
			if !f.optional {
				return nil, fmt.Errorf("%s: required, missing or null", p)
			}
			continue
		}
		if err := checkKind(p, v, f); err != nil {
			return nil, err
		}
	}
	var unknown []string
	for k := range obj {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s: fields the documentation does not name: %v", where(path), unknown)
	}
	return obj, nil
}

func checkKind(p string, v json.RawMessage, f field) error {
	switch f.kind {
	case kString:
		var s string
		if json.Unmarshal(v, &s) != nil {
			return fmt.Errorf("%s: not a string: %s", p, v)
		}
	case kInt32, kInt64:
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if bytes.HasPrefix(v, []byte(`"`)) || d.Decode(&n) != nil { // json.Number also takes a string
			return fmt.Errorf("%s: not a number: %s", p, v)
		}
		i, err := n.Int64()
		if err != nil {
			return fmt.Errorf("%s: not an integer: %s", p, v)
		}
		if f.kind == kInt32 && int64(int32(i)) != i {
			return fmt.Errorf("%s: %d is outside int32", p, i)
		}
	case kJSON:
		var s string
		if json.Unmarshal(v, &s) != nil {
			return fmt.Errorf("%s: not a string (io.debezium.data.Json): %s", p, v)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil || doc == nil {
			return fmt.Errorf("%s: the string is not a JSON object: %q", p, s)
		}
	case kStringArray:
		var a []string
		if json.Unmarshal(v, &a) != nil {
			return fmt.Errorf("%s: not an array of strings: %s", p, v)
		}
	case kStruct:
		_, err := check(p, v, f.fields)
		return err
	case kStructArray:
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil {
			return fmt.Errorf("%s: not an array: %s", p, v)
		}
		for i, e := range a {
			if _, err := check(fmt.Sprintf("%s[%d]", p, i), e, f.fields); err != nil {
				return err
			}
		}
	}
	return nil
}

func where(path string) string {
	if path == "" {
		return "value"
	}
	return path
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func str(v json.RawMessage) string {
	var s string
	json.Unmarshal(v, &s)
	return s
}

func i64(v json.RawMessage) int64 {
	var n int64
	json.Unmarshal(v, &n)
	return n
}

func i64p(v json.RawMessage) *int64 {
	if isNull(v) {
		return nil
	}
	n := i64(v)
	return &n
}

func objOf(v json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	json.Unmarshal(v, &m)
	return m
}
