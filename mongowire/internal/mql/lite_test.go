package mql

import (
	"testing"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestCheckStageNames(t *testing.T) {
	t.Parallel()
	if err := CheckStageNames(val(t, `[{"$set": {"a": 1}}, {"$group": {"_id": null}}]`)); err != nil {
		t.Fatalf("known stages: %v", err) // $group in an update is the statement's error, not this one's
	}
	if err := CheckStageNames(val(t, `{"$set": {"a": 1}}`)); err != nil {
		t.Fatalf("an update document is not a pipeline: %v", err)
	}
	wantCode(t, CheckStageNames(val(t, `[{"$set": {"a": 1}}, {"$invalidOperator": true}]`)), mongoerr.Location40324, "Unrecognized pipeline stage name: '$invalidOperator'")
	wantCode(t, CheckStageNames(val(t, `[{"$set": {"a": 1}, "$unset": "b"}]`)), 40323, "A pipeline stage specification object must contain exactly one field.")
	wantCode(t, CheckStageNames(val(t, `[1]`)), mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
}
