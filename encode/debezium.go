package encode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
)

// DebeziumVersion fills source.version: the Debezium release whose
// MongoDB connector event value Debezium writes. Consumers that branch on
// the version see the shape they were written for.
const DebeziumVersion = "3.0.0.Final"

// Debezium writes the value of the change event Debezium's MongoDB
// connector sends to Kafka, as its JSON converter renders it with
// schemas.enable=false; see the package documentation for the fields. It is
// safe for concurrent use once set up; its Encode method matches
// pipeline.EncodeFunc.
type Debezium struct {
	// Name is source.name, Debezium's logical name (its topic.prefix).
	Name string
	// Now is the processing time written as ts_ms; time.Now if nil.
	Now func() time.Time
}

var errDebeziumPayload = errors.New("the Debezium envelope holds MongoDB documents, and this event is a message with a payload")

// Encode appends the Debezium change event value of ev (one JSON object,
// no newline). An event Debezium has no value for (a marker, a drop, a
// rename, an invalidate, any other DDL, the begin and end lines of a
// re-snapshot) appends nothing. On error, dst is
// returned unchanged.
func (d *Debezium) Encode(dst []byte, ev *cdc.Event) ([]byte, error) {
	if ev == nil {
		return dst, errNilEvent
	}
	var op byte
	switch ev.Op {
	case cdc.OpInsert:
		op = 'c'
	case cdc.OpUpdate, cdc.OpReplace:
		op = 'u'
	case cdc.OpDelete:
		op = 'd'
	case cdc.OpSnapshot:
		if len(ev.FullDocument) == 0 {
			// The begin and end lines of a re-snapshot (tide snapshot):
			// Debezium has no event for them.
			return dst, nil
		}
		op = 'r'
	default:
		return dst, nil
	}
	if ev.PayloadFormat != cdc.PayloadNone {
		return dst, fmt.Errorf("encode %s event on %s: %w", ev.Op, ev.Namespace, errDebeziumPayload)
	}
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	start := len(dst)
	dst = slices.Grow(dst, 384+len(d.Name)+len(ev.Namespace)+
		3*(len(ev.FullDocument)+len(ev.PreImage)+len(ev.UpdateDesc)))
	var err error

	dst = append(dst, `{"before":`...)
	if dst, err = appendJSONString(dst, ev.PreImage, true); err != nil {
		return dst[:start], fieldError("before", ev, err)
	}
	dst = append(dst, `,"after":`...)
	if ev.Op == cdc.OpDelete {
		dst = append(dst, "null"...)
	} else if dst, err = appendJSONString(dst, ev.FullDocument, true); err != nil {
		return dst[:start], fieldError("after", ev, err)
	}
	dst = append(dst, `,"updateDescription":`...)
	if ev.Op == cdc.OpUpdate && len(ev.UpdateDesc) > 0 {
		if dst, err = appendUpdateDescription(dst, ev.UpdateDesc); err != nil {
			return dst[:start], fieldError("updateDescription", ev, err)
		}
	} else {
		dst = append(dst, "null"...)
	}

	processed := now()
	db, coll, _ := strings.Cut(ev.Namespace, ".")
	srcNS := int64(ev.ClusterTime.T) * 1e9
	if ev.ClusterTime.T == 0 {
		// A snapshot read has no cluster time; Debezium stamps it with
		// the time it read the document.
		srcNS = processed.UnixNano()
	}
	dst = append(dst, `,"source":{"version":"`+DebeziumVersion+`","connector":"mongodb","name":`...)
	dst = AppendString(dst, d.Name)
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, srcNS/1e6, 10)
	if op == 'r' {
		dst = append(dst, `,"snapshot":"true","db":`...)
	} else {
		dst = append(dst, `,"snapshot":"false","db":`...)
	}
	dst = AppendString(dst, db)
	dst = append(dst, `,"sequence":null,"ts_us":`...)
	dst = strconv.AppendInt(dst, srcNS/1e3, 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, srcNS, 10)
	dst = append(dst, `,"collection":`...)
	dst = AppendString(dst, coll)
	dst = append(dst, `,"ord":`...)
	dst = strconv.AppendUint(dst, uint64(ev.ClusterTime.I), 10)
	if dst, err = appendSession(dst, ev.Extra); err != nil {
		return dst[:start], fieldError("source.lsid", ev, err)
	}
	dst = append(dst, `,"wallTime":`...)
	if ev.WallTimeMS != 0 {
		dst = strconv.AppendInt(dst, ev.WallTimeMS, 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `},"op":"`...)
	dst = append(dst, op)
	ns := processed.UnixNano()
	dst = append(dst, `","ts_ms":`...)
	dst = strconv.AppendInt(dst, ns/1e6, 10)
	dst = append(dst, `,"ts_us":`...)
	dst = strconv.AppendInt(dst, ns/1e3, 10)
	dst = append(dst, `,"ts_ns":`...)
	dst = strconv.AppendInt(dst, ns, 10)
	return append(dst, `,"transaction":null}`...), nil
}

// appendJSONString writes a document as a JSON string holding its strict
// JSON (appendStrict), as Debezium writes before, after and lsid, or
// relaxed Extended JSON, as it writes updatedFields; null for none. The
// document's JSON is written at the end of dst, escaped after it, and the
// escaped copy moved down over it: appending never writes over the bytes
// being read, so nothing else is allocated.
func appendJSONString(dst []byte, doc []byte, strict bool) ([]byte, error) {
	if len(doc) == 0 {
		return append(dst, "null"...), nil
	}
	m := len(dst)
	var err error
	if strict {
		dst, err = appendStrict(dst, doc)
	} else {
		dst, err = appendTop(dst, doc, false)
	}
	if err != nil {
		return dst[:m], err
	}
	n := len(dst)
	dst = appendQuotedJSON(dst, dst[m:n])
	k := copy(dst[m:], dst[n:])
	return dst[:m+k], nil
}

// appendQuotedJSON appends JSON text this package wrote as a JSON string.
// Its writers escape control characters and invalid UTF-8 in strings, so
// only '"' and '\\' need a backslash, and runs without either are copied
// eight bytes at a time. A control character (a DBPointer's namespace,
// which the relaxed writer copies raw, as the driver does) hands the rest
// to appendEscaped.
func appendQuotedJSON(dst, s []byte) []byte {
	dst = append(dst, '"')
	for {
		i := indexQuoteOrControl(s)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i]...)
		if s[i] < 0x20 {
			// appendEscaped writes its own opening quote: drop it,
			// keep its closing one.
			at := len(dst)
			dst = appendEscaped(dst, s[i:])
			copy(dst[at:], dst[at+1:])
			return dst[:len(dst)-1]
		}
		dst = append(dst, '\\', s[i])
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendUpdateDescription writes Debezium's updateDescription: updatedFields
// as a JSON string of relaxed Extended JSON, removedFields and
// truncatedArrays ({field, size}) as arrays, each null when absent or
// empty, as Debezium leaves them.
func appendUpdateDescription(dst []byte, desc []byte) ([]byte, error) {
	d := bsoncore.Document(desc)
	if err := d.Validate(); err != nil {
		return dst, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	dst = append(dst, `{"removedFields":`...)
	removed, _ := d.Lookup("removedFields").ArrayOK()
	vals, _ := removed.Values()
	if len(vals) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				return dst, fmt.Errorf("%w: removedFields[%d] is %s, not a string", ErrMalformed, i, v.Type)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"updatedFields":`...)
	updated, _ := d.Lookup("updatedFields").DocumentOK()
	var err error
	if dst, err = appendJSONString(dst, updated, false); err != nil {
		return dst, err
	}
	dst = append(dst, `,"truncatedArrays":`...)
	truncated, _ := d.Lookup("truncatedArrays").ArrayOK()
	vals, _ = truncated.Values()
	if len(vals) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, v := range vals {
			t, ok := v.DocumentOK()
			field, okf := t.Lookup("field").StringValueOK()
			size, oks := t.Lookup("newSize").AsInt64OK()
			if !ok || !okf || !oks {
				return dst, fmt.Errorf("%w: truncatedArrays[%d] is not {field: string, newSize: number}", ErrMalformed, i)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"field":`...)
			dst = AppendString(dst, field)
			dst = append(dst, `,"size":`...)
			dst = strconv.AppendInt(dst, size, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// appendSession writes the source block's lsid (a JSON string of the
// session id document) and txnNumber, from a change event's fields kept
// in Extra; both null outside a transaction.
func appendSession(dst []byte, extra []byte) ([]byte, error) {
	var lsid []byte
	txn, hasTxn := int64(0), false
	if len(extra) > 0 {
		d := bsoncore.Document(extra)
		lsid, _ = d.Lookup("lsid").DocumentOK()
		txn, hasTxn = d.Lookup("txnNumber").AsInt64OK()
	}
	dst = append(dst, `,"lsid":`...)
	var err error
	if dst, err = appendJSONString(dst, lsid, true); err != nil {
		return dst, err
	}
	dst = append(dst, `,"txnNumber":`...)
	if hasTxn {
		return strconv.AppendInt(dst, txn, 10), nil
	}
	return append(dst, "null"...), nil
}

// indexQuoteOrControl returns the index of the first '"', '\\' or byte
// below 0x20 in s, or -1. It tests eight bytes at a time: in each of
// quote, slash and less the high bit of a byte is set where that byte
// matches (bytes above the first match may be flagged too; the lowest
// flag is exact).
func indexQuoteOrControl(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		quote := x ^ (ones * '"')
		quote = (quote - ones) & ^quote
		slash := x ^ (ones * '\\')
		slash = (slash - ones) & ^slash
		less := (x - ones*0x20) & ^x
		if m := (quote | slash | less) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return -1
}

// errNoID is DebeziumKey's error for a document key without an _id.
var errNoID = errors.New("the document key has no _id")

// DebeziumKey appends the key Debezium's MongoDB connector gives a
// change event's record, as its JSON converter renders it with
// schemas.enable=false: {"id":"…"}, the string holding the _id of
// documentKey (a BSON document) in strict JSON, as before and after hold
// documents. Other fields of a sharded collection's document key are left
// out, as Debezium leaves them out. On error, dst is returned unchanged.
func DebeziumKey(dst []byte, documentKey []byte) ([]byte, error) {
	id, err := bsoncore.Document(documentKey).LookupErr("_id")
	if err != nil {
		return dst, errNoID
	}
	// One document {_id: value}, written strict, gives {"_id":value}:
	// keep the value.
	doc := bsoncore.BuildDocumentFromElements(nil, bsoncore.AppendValueElement(nil, "_id", id))
	start := len(dst)
	dst = append(dst, `{"id":`...)
	m := len(dst)
	if dst, err = appendStrict(dst, doc); err != nil {
		return dst[:start], err
	}
	n := len(dst)
	const prefix = len(`{"_id":`)
	dst = appendQuotedJSON(dst, dst[m+prefix:n-1])
	k := copy(dst[m:], dst[n:])
	return append(dst[:m+k], '}'), nil
}
