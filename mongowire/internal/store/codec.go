package store

import (
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// encodeEntry appends the BSON form of an oplog entry, as kept in the
// journal and in snapshots.
func encodeEntry(dst []byte, e *OplogEntry) ([]byte, error) {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst = bsoncore.AppendTimestampElement(dst, "ts", e.TS.T, e.TS.I)
	dst = bsoncore.AppendDateTimeElement(dst, "w", e.Wall.UnixMilli())
	dst = bsoncore.AppendStringElement(dst, "op", e.Op)
	dst = bsoncore.AppendStringElement(dst, "db", e.NS.DB)
	dst = bsoncore.AppendStringElement(dst, "coll", e.NS.Coll)
	if len(e.UUID.Data) > 0 {
		dst = bsoncore.AppendBinaryElement(dst, "uuid", e.UUID.Subtype, e.UUID.Data)
	}
	for _, f := range []struct {
		key string
		doc bson.Raw
	}{{"k", e.DocKey}, {"d", e.Doc}, {"p", e.Pre}} {
		if f.doc != nil {
			dst = bsoncore.AppendDocumentElement(dst, f.key, f.doc)
		}
	}
	if e.Update != nil {
		u, err := bson.Marshal(bson.D{
			{Key: "u", Value: e.Update.UpdatedFields},
			{Key: "r", Value: e.Update.RemovedFields},
			{Key: "t", Value: truncatedDocs(e.Update.TruncatedArrays)},
			{Key: "dp", Value: e.Update.DisambiguatedPaths},
		})
		if err != nil {
			return nil, fmt.Errorf("encode update description: %w", err)
		}
		dst = bsoncore.AppendDocumentElement(dst, "u", u)
	}
	if e.Extra != nil {
		x, err := bson.Marshal(e.Extra)
		if err != nil {
			return nil, fmt.Errorf("encode %s details: %w", e.Op, err)
		}
		dst = bsoncore.AppendDocumentElement(dst, "x", x)
	}
	if x := e.Txn; x != nil {
		dst = bsoncore.AppendDocumentElement(dst, "lsid", x.LSID)
		dst = bsoncore.AppendInt64Element(dst, "txn", x.Number)
		dst = bsoncore.AppendInt32Element(dst, "txi", int32(x.OpIndex))
		dst = bsoncore.AppendBooleanElement(dst, "txe", x.Last)
	}
	return bsoncore.AppendDocumentEnd(dst, idx)
}

func txnOf(e *OplogEntry) *TxnInfo {
	if e.Txn == nil {
		e.Txn = &TxnInfo{}
	}
	return e.Txn
}

func truncatedDocs(ts []TruncatedArray) bson.A {
	a := bson.A{}
	for _, t := range ts {
		a = append(a, bson.D{{Key: "f", Value: t.Field}, {Key: "n", Value: t.NewSize}})
	}
	return a
}

// decodeEntry reads an entry written by encodeEntry. The documents it
// holds are copies, independent of raw.
func decodeEntry(raw bson.Raw) (OplogEntry, error) {
	var e OplogEntry
	elems, err := raw.Elements()
	if err != nil {
		return e, err
	}
	for _, el := range elems {
		v := el.Value()
		switch el.Key() {
		case "ts":
			e.TS.T, e.TS.I = v.Timestamp()
		case "w":
			e.Wall = time.UnixMilli(v.DateTime())
		case "op":
			e.Op = v.StringValue()
		case "db":
			e.NS.DB = v.StringValue()
		case "coll":
			e.NS.Coll = v.StringValue()
		case "uuid":
			st, data := v.Binary()
			e.UUID = bson.Binary{Subtype: st, Data: clone(data)}
		case "k":
			e.DocKey = clone(v.Document())
		case "d":
			e.Doc = clone(v.Document())
		case "p":
			e.Pre = clone(v.Document())
		case "u":
			if e.Update, err = decodeUpdate(clone(v.Document())); err != nil {
				return e, err
			}
		case "lsid":
			txnOf(&e).LSID = clone(v.Document())
		case "txn":
			txnOf(&e).Number = v.Int64()
		case "txi":
			txnOf(&e).OpIndex = int(v.Int32())
		case "txe":
			txnOf(&e).Last = v.Boolean()
		case "x":
			if err := bson.Unmarshal(v.Document(), &e.Extra); err != nil {
				return e, fmt.Errorf("decode %s details: %w", e.Op, err)
			}
		}
	}
	e.Size = entrySize(&e)
	return e, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func decodeUpdate(raw bson.Raw) (*UpdateDescription, error) {
	u := &UpdateDescription{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{}}
	if v, err := raw.LookupErr("u"); err == nil {
		elems, err := v.Document().Elements()
		if err != nil {
			return nil, err
		}
		for _, el := range elems {
			u.UpdatedFields = append(u.UpdatedFields, bson.E{Key: el.Key(), Value: el.Value()})
		}
	}
	if v, err := raw.LookupErr("r"); err == nil {
		vals, _ := v.Array().Values()
		for _, f := range vals {
			u.RemovedFields = append(u.RemovedFields, f.StringValue())
		}
	}
	if v, err := raw.LookupErr("t"); err == nil {
		vals, _ := v.Array().Values()
		for _, t := range vals {
			d := t.Document()
			u.TruncatedArrays = append(u.TruncatedArrays, TruncatedArray{Field: d.Lookup("f").StringValue(), NewSize: d.Lookup("n").Int32()})
		}
	}
	if v, err := raw.LookupErr("dp"); err == nil && v.Type == bson.TypeEmbeddedDocument {
		if err := bson.Unmarshal(v.Document(), &u.DisambiguatedPaths); err != nil {
			return nil, err
		}
		if len(u.DisambiguatedPaths) == 0 {
			u.DisambiguatedPaths = nil
		}
	}
	return u, nil
}

// specFromDoc reads an index description made by indexDoc.
func specFromDoc(d bson.D) IndexSpec {
	var spec IndexSpec
	for _, e := range d {
		switch e.Key {
		case "v":
		case "key":
			spec.Key, _ = e.Value.(bson.D)
		case "name":
			spec.Name, _ = e.Value.(string)
		case "unique":
			spec.Unique, _ = e.Value.(bool)
		case "sparse":
			spec.Sparse, _ = e.Value.(bool)
		default:
			spec.Options = append(spec.Options, e)
		}
	}
	return spec
}

// parseNamespace splits "db.coll".
func parseNamespace(s string) Namespace {
	db, coll, _ := strings.Cut(s, ".")
	return Namespace{DB: db, Coll: coll}
}

// firstIndexDoc returns the single index described by a createIndexes or
// dropIndexes entry.
func firstIndexDoc(extra bson.D) bson.D {
	for _, e := range extra {
		if e.Key != "indexes" {
			continue
		}
		if a, ok := e.Value.(bson.A); ok && len(a) > 0 {
			d, _ := a[0].(bson.D)
			return d
		}
	}
	return nil
}
