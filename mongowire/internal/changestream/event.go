package changestream

import (
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Lookup returns the current version of a document by its document key in
// the collection with the given UUID, for fullDocument: "updateLookup"; nil
// (and no error) when the document or the collection is gone.
type Lookup func(ns store.Namespace, uuid bson.Binary, docKey bson.Raw) (bson.Raw, error)

// Event is one change-stream event (or one fragment of a split event).
type Event struct {
	Token      Token
	Doc        bson.Raw
	Invalidate bool // the stream ends after this event

	key    []byte   // Token's KeyString
	tokDoc bson.Raw // Token as a document
}

// maxEventBytes is the largest event a reply may carry (BSONObjMaxUserSize).
const maxEventBytes = 16 << 20

// ddlOps are the events only shown with showExpandedEvents.
var ddlOps = map[string]bool{"create": true, "createIndexes": true, "dropIndexes": true, "modify": true}

// watches reports whether the stream sees entries of namespace ns.
func (s *Spec) watches(ns store.Namespace) bool {
	if strings.HasPrefix(ns.Coll, "system.") {
		return false
	}
	switch s.Level {
	case CollectionLevel:
		return ns.DB == s.DB && ns.Coll == s.Coll
	case DatabaseLevel:
		return ns.DB == s.DB
	}
	switch ns.DB {
	case "admin", "config", "local":
		return false
	}
	return true
}

// renameTarget reads the target namespace of a rename entry.
func renameTarget(e *store.OplogEntry) (store.Namespace, bool) {
	for _, x := range e.Extra {
		if x.Key != "to" {
			continue
		}
		switch v := x.Value.(type) {
		case string:
			db, coll, ok := strings.Cut(v, ".")
			return store.Namespace{DB: db, Coll: coll}, ok
		case store.Namespace:
			return v, true
		}
	}
	return store.Namespace{}, false
}

func extra(e *store.OplogEntry, key string) (any, bool) {
	for _, x := range e.Extra {
		if x.Key == key {
			return x.Value, true
		}
	}
	return nil, false
}

// relevant reports whether the entry produces events in this stream.
func (s *Spec) relevant(e *store.OplogEntry) bool {
	if ddlOps[e.Op] && !s.ShowExpandedEvents {
		return false
	}
	switch e.Op {
	case "dropDatabase":
		return s.Level == ClusterLevel && s.watches(store.Namespace{DB: e.NS.DB}) || e.NS.DB == s.DB
	case "rename":
		if s.watches(e.NS) {
			return true
		}
		to, ok := renameTarget(e)
		return ok && s.watches(to)
	}
	return s.watches(e.NS)
}

// invalidates reports whether the entry ends this stream.
func (s *Spec) invalidates(op string) bool {
	switch s.Level {
	case CollectionLevel:
		return op == "drop" || op == "rename" || op == "dropDatabase"
	case DatabaseLevel:
		return op == "dropDatabase"
	}
	return false
}

// builder appends the fields of an event document in MongoDB's order.
type builder struct {
	idx int32
	b   []byte
}

func newBuilder(sizeHint int) *builder {
	bd := &builder{}
	bd.idx, bd.b = bsoncore.AppendDocumentStart(make([]byte, 0, sizeHint+256))
	return bd
}

func (bd *builder) str(k, v string) { bd.b = bsoncore.AppendStringElement(bd.b, k, v) }
func (bd *builder) doc(k string, d []byte) {
	bd.b = bsoncore.AppendDocumentElement(bd.b, k, d)
}
func (bd *builder) null(k string) { bd.b = bsoncore.AppendNullElement(bd.b, k) }
func (bd *builder) docOrNull(k string, d []byte) {
	if d == nil {
		bd.null(k)
	} else {
		bd.doc(k, d)
	}
}
func (bd *builder) ts(k string, t bson.Timestamp) {
	bd.b = bsoncore.AppendTimestampElement(bd.b, k, t.T, t.I)
}
func (bd *builder) uuid(k string, u []byte) { bd.b = bsoncore.AppendBinaryElement(bd.b, k, 4, u) }
func (bd *builder) date(k string, t time.Time) {
	bd.b = bsoncore.AppendDateTimeElement(bd.b, k, t.UnixMilli())
}
func (bd *builder) value(k string, v any) error {
	t, data, err := bson.MarshalValue(v)
	if err != nil {
		return fmt.Errorf("field %s: %w", k, err)
	}
	bd.b = bsoncore.AppendValueElement(bd.b, k, bsoncore.Value{Type: bsoncore.Type(t), Data: data})
	return nil
}
func (bd *builder) done() bson.Raw {
	b, _ := bsoncore.AppendDocumentEnd(bd.b, bd.idx)
	return bson.Raw(b)
}

func nsDoc(ns store.Namespace) []byte {
	db := bsoncore.NewDocumentBuilder().AppendString("db", ns.DB)
	if ns.Coll != "" {
		db.AppendString("coll", ns.Coll)
	}
	return db.Build()
}

// operationDescription builds the payload of a DDL event (nil for none).
func operationDescription(e *store.OplogEntry) ([]byte, error) {
	switch e.Op {
	case "rename":
		to, ok := renameTarget(e)
		if !ok {
			return nil, fmt.Errorf("rename entry at %v has no target namespace", e.TS)
		}
		b := bsoncore.NewDocumentBuilder().AppendDocument("to", nsDoc(to))
		if v, ok := extra(e, "dropTarget"); ok {
			if u, ok := v.(bson.Binary); ok && len(u.Data) > 0 {
				b.AppendBinary("dropTarget", 4, u.Data)
			}
		}
		return b.Build(), nil
	case "create":
		bd := newBuilder(64)
		if v, ok := extra(e, "options"); ok {
			if err := appendFields(bd, v); err != nil {
				return nil, err
			}
		}
		if len(e.UUID.Data) == 0 { // a view: {viewOn, pipeline}, no _id index
			return bd.done(), nil
		}
		bd.doc("idIndex", bsoncore.NewDocumentBuilder().
			AppendInt32("v", 2).
			AppendDocument("key", bsoncore.NewDocumentBuilder().AppendInt32("_id", 1).Build()).
			AppendString("name", "_id_").Build())
		return bd.done(), nil
	case "createIndexes", "dropIndexes", "modify":
		bd := newBuilder(64)
		for _, x := range e.Extra {
			if x.Key == "stateBeforeChange" {
				continue
			}
			if err := bd.value(x.Key, x.Value); err != nil {
				return nil, err
			}
		}
		return bd.done(), nil
	}
	return nil, nil
}

// appendFields copies the fields of a document-like value into bd.
func appendFields(bd *builder, v any) error {
	switch d := v.(type) {
	case bson.D:
		for _, x := range d {
			if err := bd.value(x.Key, x.Value); err != nil {
				return err
			}
		}
	case bson.Raw:
		elems, err := d.Elements()
		if err != nil {
			return err
		}
		for _, x := range elems {
			bd.b = bsoncore.AppendValueElement(bd.b, x.Key(), bsoncore.Value{Type: bsoncore.Type(x.Value().Type), Data: x.Value().Value})
		}
	case nil:
	default:
		return fmt.Errorf("options of type %T", v)
	}
	return nil
}

func updateDescription(u *store.UpdateDescription, expanded bool) ([]byte, error) {
	bd := newBuilder(128)
	if u == nil {
		u = &store.UpdateDescription{}
	}
	fields := newBuilder(64)
	for _, f := range u.UpdatedFields {
		if err := fields.value(f.Key, f.Value); err != nil {
			return nil, err
		}
	}
	bd.doc("updatedFields", fields.done())
	idx, arr := bsoncore.AppendArrayStart(nil)
	for i, f := range u.RemovedFields {
		arr = bsoncore.AppendStringElement(arr, fmt.Sprint(i), f)
	}
	arr, _ = bsoncore.AppendArrayEnd(arr, idx)
	bd.b = bsoncore.AppendArrayElement(bd.b, "removedFields", arr)
	idx, arr = bsoncore.AppendArrayStart(nil)
	for i, t := range u.TruncatedArrays {
		arr = bsoncore.AppendDocumentElement(arr, fmt.Sprint(i), bsoncore.NewDocumentBuilder().
			AppendString("field", t.Field).AppendInt32("newSize", t.NewSize).Build())
	}
	arr, _ = bsoncore.AppendArrayEnd(arr, idx)
	bd.b = bsoncore.AppendArrayElement(bd.b, "truncatedArrays", arr)
	if expanded {
		paths := newBuilder(16)
		for _, f := range u.DisambiguatedPaths {
			if err := paths.value(f.Key, f.Value); err != nil {
				return nil, err
			}
		}
		bd.doc("disambiguatedPaths", paths.done())
	}
	return bd.done(), nil
}

// eventID is the v2 event identifier: {operationType, documentKey} for
// document events, {operationType, operationDescription} for the others.
func eventID(op string, docKey, opDesc []byte) bson.Raw {
	b := bsoncore.NewDocumentBuilder().AppendString("operationType", op)
	switch {
	case docKey != nil:
		b.AppendDocument("documentKey", docKey)
	case opDesc != nil:
		b.AppendDocument("operationDescription", opDesc)
	}
	return bson.Raw(b.Build())
}

func entryUUID(e *store.OplogEntry) []byte {
	if len(e.UUID.Data) == 0 {
		return nil
	}
	return e.UUID.Data
}

// build turns one relevant oplog entry into the stream's events, before
// the user's stages: the event itself and, when the entry ends the stream,
// the invalidate that follows it.
func (s *Spec) build(e *store.OplogEntry, lookup Lookup) ([]Event, error) {
	// A dropDatabase logs the drop of each collection first, so a
	// collection stream whose collection existed has already ended with
	// its drop; otherwise it sees the dropDatabase, then invalidate.
	ev, err := s.buildOne(e, lookup)
	if err != nil {
		return nil, err
	}
	out := []Event{ev}
	if s.invalidates(e.Op) {
		inv := ev.Token
		inv.FromInvalidate = true
		key, tokDoc, err := inv.encode()
		if err != nil {
			return nil, err
		}
		bd := newBuilder(64)
		bd.doc("_id", tokDoc)
		bd.str("operationType", "invalidate")
		bd.ts("clusterTime", e.TS)
		bd.date("wallTime", e.Wall)
		out = append(out, Event{Token: inv, Doc: bd.done(), Invalidate: true, key: key, tokDoc: tokDoc})
	}
	return out, nil
}

func (s *Spec) buildOne(e *store.OplogEntry, lookup Lookup) (Event, error) {
	docOp := e.Op == "insert" || e.Op == "update" || e.Op == "replace" || e.Op == "delete"
	var opDesc []byte
	if !docOp {
		var err error
		if opDesc, err = operationDescription(e); err != nil {
			return Event{}, err
		}
	}
	var docKey []byte
	if docOp {
		docKey = e.DocKey
	}
	tok := Token{ClusterTime: e.TS, Version: TokenVersion, Type: EventToken, UUID: entryUUID(e),
		EventID: eventID(e.Op, docKey, opDesc)}
	if e.Txn != nil {
		tok.TxnOpIndex = e.Txn.OpIndex // the events of a transaction share its cluster time
	}
	if e.Op == "dropDatabase" {
		tok.UUID = nil
	}
	key, tokDoc, err := tok.encode()
	if err != nil {
		return Event{}, fmt.Errorf("resume token of %s at %v: %w", e.Op, e.TS, err)
	}

	bd := newBuilder(len(e.Doc) + len(e.Pre))
	if e.Op == "rename" {
		to, _ := renameTarget(e)
		bd.doc("to", nsDoc(to))
	}
	bd.doc("_id", tokDoc)
	bd.str("operationType", e.Op)
	bd.ts("clusterTime", e.TS)
	if s.ShowExpandedEvents && tok.UUID != nil {
		bd.uuid("collectionUUID", tok.UUID)
	}
	bd.date("wallTime", e.Wall)
	switch e.Op {
	case "insert", "replace":
		bd.docOrNull("fullDocument", e.Doc)
	case "update":
		switch s.FullDocument {
		case FullDocUpdateLookup:
			var cur bson.Raw
			if lookup != nil {
				if cur, err = lookup(e.NS, e.UUID, e.DocKey); err != nil {
					return Event{}, fmt.Errorf("look up the current document of %s: %w", e.NS, err)
				}
			}
			bd.docOrNull("fullDocument", cur)
		case FullDocWhenAvailable, FullDocRequired:
			// The point-in-time post-image exists only where a pre-image
			// was recorded (changeStreamPreAndPostImages); the entry's
			// post-image is that pre-image with the update applied.
			if e.Pre == nil && s.FullDocument == FullDocRequired {
				return Event{}, mongoerr.New(mongoerr.NoMatchingDocument,
					"Change stream was configured to require a post-image for all update events, but the post-image was not found for event: %s", describe(tokDoc, e))
			}
			var post bson.Raw
			if e.Pre != nil {
				post = e.Doc
			}
			bd.docOrNull("fullDocument", post)
		}
	}
	ns := e.NS
	if e.Op == "dropDatabase" {
		ns = store.Namespace{DB: e.NS.DB}
	}
	bd.doc("ns", nsDoc(ns))
	if docOp {
		bd.doc("documentKey", e.DocKey)
	}
	if s.ShowExpandedEvents && opDesc != nil {
		bd.doc("operationDescription", opDesc)
	}
	if e.Op == "update" {
		ud, err := updateDescription(e.Update, s.ShowExpandedEvents)
		if err != nil {
			return Event{}, fmt.Errorf("update description at %v: %w", e.TS, err)
		}
		bd.doc("updateDescription", ud)
	}
	if e.Op == "modify" {
		if v, ok := extra(e, "stateBeforeChange"); ok {
			if err := bd.value("stateBeforeChange", v); err != nil {
				return Event{}, err
			}
		}
	}
	if s.FullDocumentBeforeChange != FullDocOff && (e.Op == "update" || e.Op == "replace" || e.Op == "delete") {
		if e.Pre == nil && s.FullDocumentBeforeChange == FullDocRequired {
			return Event{}, mongoerr.New(mongoerr.NoMatchingDocument,
				"Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %s", describe(tokDoc, e))
		}
		bd.docOrNull("fullDocumentBeforeChange", e.Pre)
	}
	if x := e.Txn; x != nil { // a transaction's operation, as mongod shows it
		bd.doc("lsid", x.LSID)
		bd.b = bsoncore.AppendInt64Element(bd.b, "txnNumber", x.Number)
	}
	return Event{Token: tok, Doc: bd.done(), key: key, tokDoc: tokDoc}, nil
}

// describe names an event in an error message.
func describe(tokDoc bson.Raw, e *store.OplogEntry) string {
	return fmt.Sprintf("{_id: %s, operationType: %q, ns: %q, documentKey: %s}", tokDoc, e.Op, e.NS.String(), e.DocKey)
}
