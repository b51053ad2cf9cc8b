package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// CheckStageNames is mongod's lite parse of a pipeline: every stage is an
// object of one field naming a known stage. mongod runs it when it parses
// a command (to work out the privileges a pipeline needs), so in an update
// an unknown stage fails the whole command rather than one statement.
func CheckStageNames(pipeline bson.RawValue) error {
	if pipeline.Type != bson.TypeArray {
		return nil
	}
	for _, s := range arrayValues(pipeline.Value) {
		if s.Type != bson.TypeEmbeddedDocument {
			return mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
		}
		it := iterDoc(s.Value)
		k, _, ok := it.next()
		if _, _, more := it.next(); !ok || more {
			return mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		if _, ok := lookupOperator(pipelineStages, string(k)); !ok {
			return mongoerr.New(mongoerr.Location40324, "Unrecognized pipeline stage name: '%s'", k)
		}
	}
	return nil
}
