package mongo

import (
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
)

// eventOverhead is charged on top of an event's bytes for the cdc.Event
// itself and the slice headers pointing into its buffer.
const eventOverhead = 256

// nsCache holds the last namespace seen, so that a stream of events of
// one collection shares one string instead of building one per event.
type nsCache struct {
	db, coll []byte
	ns       string
}

// namespace returns "db.coll" ("db" without a collection).
func (c *nsCache) namespace(db, coll []byte, hasColl bool) string {
	if c != nil && c.ns != "" && string(db) == string(c.db) && string(coll) == string(c.coll) && hasColl == (c.coll != nil) {
		return c.ns
	}
	ns := string(db)
	if hasColl {
		ns += "." + string(coll)
	}
	if c != nil {
		c.db, c.ns = append(c.db[:0], db...), ns
		c.coll = nil
		if hasColl {
			c.coll = append([]byte{}, coll...)
		}
	}
	return ns
}

// opOf returns the operation named s, without a string per event for
// the common ones.
func opOf(s []byte) cdc.Op {
	switch string(s) {
	case "insert":
		return cdc.OpInsert
	case "update":
		return cdc.OpUpdate
	case "replace":
		return cdc.OpReplace
	case "delete":
		return cdc.OpDelete
	}
	return cdc.Op(s)
}

// stringBytes returns the bytes of a BSON string value, without
// converting them to a Go string.
func stringBytes(v bsoncore.Value) ([]byte, bool) {
	if v.Type != bsoncore.TypeString || len(v.Data) < 5 {
		return nil, false
	}
	n := int(int32(uint32(v.Data[0]) | uint32(v.Data[1])<<8 | uint32(v.Data[2])<<16 | uint32(v.Data[3])<<24))
	if n < 1 || 4+n > len(v.Data) {
		return nil, false
	}
	return v.Data[4 : 4+n-1], true
}

// changeEvent turns one change-stream document into an event. raw must
// be the caller's own copy: the event's fields are sub-slices of it, so
// that the reader allocates once per event and converts nothing. ns, if
// not nil, keeps the namespace string for the next event.
func changeEvent(raw []byte, ns *nsCache) (cdc.Event, error) {
	ev := cdc.Event{Size: len(raw) + eventOverhead}
	var extra []byte // elements for Extra, gathered in order
	doc := bsoncore.Document(raw)
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || int(length) != len(doc) || length < 5 {
		return ev, fmt.Errorf("change event is not a BSON document (%d bytes)", len(raw))
	}
	rem = rem[:len(rem)-1] // the trailing NUL
	for len(rem) > 0 {
		el, next, ok := bsoncore.ReadElement(rem)
		if !ok {
			return ev, fmt.Errorf("change event: malformed element at byte %d", len(raw)-len(rem))
		}
		rem = next
		kb := el.KeyBytes() // bytes, not el.Key(): no string per field per event
		v := el.Value()
		var err error
		switch string(kb) {
		case "_id":
			if v.Type != bsoncore.TypeEmbeddedDocument {
				return ev, fmt.Errorf("change event: _id is %s, not a resume token document "+
					"(a pipeline stage must not remove or change _id)", v.Type)
			}
			if err := bsoncore.Document(v.Data).Validate(); err != nil {
				return ev, fmt.Errorf("change event: _id (resume token) is malformed BSON: %w", err)
			}
			ev.ResumeToken = v.Data
		case "operationType":
			s, ok := stringBytes(v)
			if !ok {
				return ev, fmt.Errorf("change event: operationType is %s, not a string", v.Type)
			}
			ev.Op = opOf(s)
		case "clusterTime":
			if t, i, ok := v.TimestampOK(); ok {
				ev.ClusterTime = cdc.Timestamp{T: t, I: i}
			}
		case "wallTime":
			if ms, ok := v.DateTimeOK(); ok {
				ev.WallTimeMS = ms
			}
		case "ns":
			if d, ok := v.DocumentOK(); ok {
				db, _ := stringBytes(d.Lookup("db"))
				coll, ok := stringBytes(d.Lookup("coll"))
				ev.Namespace = ns.namespace(db, coll, ok)
			}
		case "documentKey":
			ev.DocumentKey, err = docOrNil("documentKey", v)
		case "fullDocument":
			ev.FullDocument, err = docOrNil("fullDocument", v)
		case "fullDocumentBeforeChange":
			ev.PreImage, err = docOrNil("fullDocumentBeforeChange", v)
		case "updateDescription":
			ev.UpdateDesc, err = docOrNil("updateDescription", v)
		case "collectionUUID":
			// The same on every event, and part of the source's identity.
		default: // to, operationDescription, stateBeforeChange, lsid, txnNumber, splitEvent…
			extra = append(extra, el...)
		}
		if err != nil {
			return ev, err
		}
	}
	if ev.ResumeToken == nil {
		return ev, fmt.Errorf("change event has no _id (resume token): a pipeline stage must not remove it")
	}
	if ev.Op == "" {
		return ev, fmt.Errorf("change event has no operationType")
	}
	if extra != nil {
		ev.Extra = bsoncore.BuildDocument(nil, extra)
		ev.Size += len(ev.Extra)
	}
	return ev, nil
}

// docOrNil returns v if it is a document, nil if it is anything else (null
// for a missing fullDocument, say). A document is checked as the driver's
// bson.Raw.Validate checks one: an element's length can agree with its
// parent's and still not end in the NUL its own length points at, and the
// encoders downstream read these fields as documents.
func docOrNil(key string, v bsoncore.Value) ([]byte, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, nil
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("change event: %s is malformed BSON: %w", key, err)
	}
	return d, nil
}

// cloneEvent copies the driver's current document (which the driver
// reuses) and converts the copy.
func cloneEvent(current bson.Raw) (cdc.Event, error) {
	return changeEvent(slices.Clone(current), nil)
}
