package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// findRecords answers find's returnKey and showRecordId. returnKey
// replaces each document by its key in the index that answered the query
// ({} after a collection scan), ignoring the projection, as mongod does;
// showRecordId appends the record id as $recordId (a long), except under
// returnKey.
func (s *Server) findRecords(ns store.Namespace, spec store.FindSpec, returnKey, showRecordID bool) ([]bson.Raw, error) {
	var proj *mql.Projection
	if len(spec.Projection) > 0 && !returnKey {
		var err error
		if proj, err = mql.CompileProjection(spec.Projection); err != nil {
			return nil, err
		}
	}
	recs, err := s.rawStore.FindRecords(ns, spec)
	if err != nil {
		return nil, err
	}
	docs := make([]bson.Raw, len(recs))
	for i, rec := range recs {
		d := rec.Doc
		switch {
		case returnKey && rec.Key != nil:
			d = rec.Key
		case returnKey:
			d = bson.Raw(bsoncore.NewDocumentBuilder().Build())
		case proj != nil:
			if d, err = proj.Apply(d, -1); err != nil {
				return nil, err
			}
		}
		if showRecordID && !returnKey { // returnKey wins, as in mongod 7.0
			d = bson.Raw(bsoncore.AppendInt64Element(d[:len(d)-1:len(d)-1], "$recordId", rec.RecordID))
			d = append(d, 0)
			bsoncore.UpdateLength(d, 0, int32(len(d)))
		}
		docs[i] = d
	}
	return docs, nil
}
