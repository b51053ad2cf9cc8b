package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// fillEmptyTimestamps replaces, as mongod does on insert, every top-level
// field (other than _id) holding the empty Timestamp(0, 0) with a fresh
// cluster time, one per document; bypassEmptyTsReplacement (which
// mongorestore sends, to restore such values as they were) turns it off.
// Documents without one are returned as they are, without copying.
func fillEmptyTimestamps(docs []bson.Raw, now func() bson.Timestamp) []bson.Raw {
	var out []bson.Raw
	for i, d := range docs {
		if !hasEmptyTimestamp(d) {
			if out != nil {
				out[i] = d
			}
			continue
		}
		if out == nil {
			out = make([]bson.Raw, len(docs))
			copy(out, docs[:i])
		}
		ts := now()
		b := bsoncore.NewDocumentBuilder()
		elems, _ := d.Elements()
		for _, e := range elems {
			v := e.Value()
			if isEmptyTimestamp(e.Key(), v) {
				b.AppendTimestamp(e.Key(), ts.T, ts.I)
				continue
			}
			b.AppendValue(e.Key(), bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
		}
		out[i] = bson.Raw(b.Build())
	}
	if out == nil {
		return docs
	}
	return out
}

func hasEmptyTimestamp(d bson.Raw) bool {
	if len(d) < 5 {
		return false
	}
	rest := bsoncore.Document(d)[4 : len(d)-1]
	for len(rest) > 0 {
		e, r, ok := bsoncore.ReadElement(rest)
		if !ok {
			return false
		}
		v := e.Value()
		if isEmptyTimestamp(e.Key(), bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}) {
			return true
		}
		rest = r
	}
	return false
}

func isEmptyTimestamp(key string, v bson.RawValue) bool {
	if v.Type != bson.TypeTimestamp || key == "_id" {
		return false
	}
	t, i := v.Timestamp()
	return t == 0 && i == 0
}
