package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
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
