package mongowire

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// writeBatch reads the statement array of insert/update/delete and checks
// its size as mongod does.
func writeBatch(r *request, field string) ([]bson.Raw, bool, error) {
	a := newArgs(r)
	docs := a.docs(field)
	ordered := true
	if _, ok := a.lookup("ordered"); ok {
		ordered = a.bool("ordered")
	}
	if a.err != nil {
		return nil, false, a.err
	}
	if _, err := r.cmd.LookupErr(field); err != nil {
		return nil, false, missingField(r.name + "." + field)
	}
	if len(docs) == 0 || len(docs) > maxWriteBatchSize {
		return nil, false, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", maxWriteBatchSize, len(docs))
	}
	if inTransaction(r.cmd) {
		// The first failed statement aborts the transaction, so a batch
		// in one stops there, ordered or not, as in mongod.
		ordered = true
	}
	return docs, ordered, nil
}

func writeErrorDoc(index int, e *mongoerr.Error) bson.D {
	e = dupKeyMessage(e)
	d := bson.D{
		{Key: "index", Value: int32(index)},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: e.CodeName},
		{Key: "errmsg", Value: e.Message},
	}
	return append(d, e.Info...)
}

// systemWriteCommands are the document writes refused on system
// collections.
var systemWriteCommands = map[string]bool{"insert": true, "update": true, "delete": true, "findAndModify": true}

// refuseSystemWrite refuses a document write to a system collection
// (system.js aside), as mongod's userAllowedWriteNS: 73 "cannot write to
// 'db.system.x'".
func refuseSystemWrite(r *request) error {
	if !systemWriteCommands[r.name] {
		return nil
	}
	coll, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok || !strings.HasPrefix(coll, "system.") || coll == "system.js" {
		return nil
	}
	if r.name == "insert" && strings.HasPrefix(coll, "system.buckets.") {
		return nil // a time-series collection's buckets, as mongorestore writes them; the store refuses others
	}
	return mongoerr.New(mongoerr.InvalidNamespace, "cannot write to '%s.%s'", r.db, coll)
}
