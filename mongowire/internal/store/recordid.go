package store

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Record is a document found by FindRecords: the whole document, its
// record id and, when an index answered the query, its key in that index.
type Record struct {
	Doc      bson.Raw
	RecordID int64
	Key      bson.Raw // nil after a collection scan
}

// FindRecords runs a query as Find does, without its projection, and
// returns with each document what find's returnKey and showRecordId show.
func (s *Store) FindRecords(ns Namespace, spec FindSpec) ([]Record, error) {
	spec.Projection = nil
	docs, plan, err := s.find(nil, ns, spec)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(docs))
	err = s.read(func() error {
		c := s.collLocked(ns)
		var key bson.D
		if c != nil && plan.Index != "" {
			if ix := c.index(plan.Index); ix != nil {
				key = ix.spec.Key
			}
		}
		for i, d := range docs {
			out[i].Doc = d
			if c != nil {
				if p := c.byID(idOf(d)); p >= 0 {
					out[i].RecordID = int64(c.recs[p].rid)
				}
			}
			if key != nil {
				out[i].Key = indexKeyOf(d, key)
			}
		}
		return nil
	})
	return out, err
}

// indexKeyOf builds {field: value} for the fields of an index key pattern;
// a missing field is null, as in the index.
func indexKeyOf(doc bson.Raw, pattern bson.D) bson.Raw {
	b := bsoncore.NewDocumentBuilder()
	for _, f := range pattern {
		v, err := doc.LookupErr(strings.Split(f.Key, ".")...)
		if err != nil {
			b.AppendNull(f.Key)
			continue
		}
		b.AppendValue(f.Key, bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
	}
	return bson.Raw(b.Build())
}
