package changestream

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func stages(t *testing.T, ss ...bson.D) []bson.Raw {
	t.Helper()
	out := make([]bson.Raw, len(ss))
	for i, s := range ss {
		out[i] = mustDoc(t, s)
	}
	return out
}

func cs(opts bson.D) bson.D { return bson.D{{Key: "$changeStream", Value: opts}} }

func TestParseErrors(t *testing.T) {
	hwm := bson.D{{Key: "_data", Value: realHWMToken}}
	inv := bson.D{{Key: "_data", Value: "8200000005000000012B042C0100296F5A100400000000000000000000000000000000463C6F7065726174696F6E54797065003C64726F70000004"}}
	noUUID := bson.D{{Key: "_data", Value: "8200000005000000012B042C0100296E14463C6F7065726174696F6E54797065003C64726F70000004"}}
	split := bson.D{{Key: "_data", Value: "8200000005000000012B042C0100296E5A100400000000000000000000000000000000463C6F7065726174696F6E54797065003C64726F7000002904"}}
	tests := map[string]struct {
		db, coll string
		pipeline []bson.D
		wantCode int32
		wantMsg  string
	}{
		"not first": {"d", "c", []bson.D{{{Key: "$match", Value: bson.D{}}}, cs(bson.D{})},
			codeNotFirstStage, "only valid as the first stage"},
		"twice": {"d", "c", []bson.D{cs(bson.D{}), cs(bson.D{})}, codeNotFirstStage, "first stage"},
		"spec not object": {"d", "c", []bson.D{{{Key: "$changeStream", Value: 1}}},
			codeSpecNotObject, "expects a document"},
		"unknown option": {"d", "c", []bson.D{cs(bson.D{{Key: "foo", Value: 1}})},
			mongoerr.IDLUnknownField, "'$changeStream.foo' is an unknown field"},
		"fullDocument not string": {"d", "c", []bson.D{cs(bson.D{{Key: "fullDocument", Value: 1}})},
			mongoerr.TypeMismatch, "'$changeStream.fullDocument' is the wrong type 'int', expected type 'string'"},
		"fullDocument bad value": {"d", "c", []bson.D{cs(bson.D{{Key: "fullDocument", Value: "always"}})},
			mongoerr.BadValue, "Enumeration value 'always' for field '$changeStream.fullDocument'"},
		"fullDocumentBeforeChange bad": {"d", "c", []bson.D{cs(bson.D{{Key: "fullDocumentBeforeChange", Value: "updateLookup"}})},
			mongoerr.BadValue, "'$changeStream.fullDocumentBeforeChange'"},
		"startAtOperationTime not ts": {"d", "c", []bson.D{cs(bson.D{{Key: "startAtOperationTime", Value: 5}})},
			mongoerr.TypeMismatch, "expected type 'timestamp'"},
		"showExpandedEvents not bool": {"d", "c", []bson.D{cs(bson.D{{Key: "showExpandedEvents", Value: "yes"}})},
			mongoerr.TypeMismatch, "expected type 'bool'"},
		"resumeAfter and startAfter": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: hwm}, {Key: "startAfter", Value: hwm}})},
			codeResumeAndStart, "Do not specify both 'resumeAfter' and 'startAfter'"},
		"token and startAtOperationTime": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: hwm}, {Key: "startAtOperationTime", Value: bson.Timestamp{T: 1}}})},
			codeTwoResumeOptions, "Only one type of resume option"},
		"resumeAfter invalidate": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: inv}})},
			mongoerr.InvalidResumeToken, "not allowed from an invalidate notification"},
		"collection resume without uuid": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: noUUID}})},
			mongoerr.InvalidResumeToken, "does not include a UUID"},
		"split token without split stage": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: split}})},
			mongoerr.ChangeStreamFatalError, "$changeStreamSplitLargeEvent"},
		"bad token": {"d", "c", []bson.D{cs(bson.D{{Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: "zz"}}}})},
			mongoerr.FailedToParse, "hex"},
		"allChangesForCluster off admin": {"d", "", []bson.D{cs(bson.D{{Key: "allChangesForCluster", Value: true}})},
			mongoerr.InvalidOptions, "may only be opened on the 'admin' database"},
		"allChangesForCluster on a collection": {"admin", "c", []bson.D{cs(bson.D{{Key: "allChangesForCluster", Value: true}})},
			mongoerr.InvalidOptions, "found admin.c"},
		"admin database":  {"admin", "", []bson.D{cs(bson.D{})}, mongoerr.InvalidNamespace, "internal admin database"},
		"local database":  {"local", "oplog.rs", []bson.D{cs(bson.D{})}, mongoerr.InvalidNamespace, "internal local database"},
		"config database": {"config", "", []bson.D{cs(bson.D{})}, mongoerr.InvalidNamespace, "internal config database"},
		"system collection": {"d", "system.views", []bson.D{cs(bson.D{})},
			mongoerr.InvalidNamespace, "internal d.system.views collection"},
		"group follows": {"d", "c", []bson.D{cs(bson.D{}), {{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}}}}},
			mongoerr.IllegalOperation, "$group is not permitted in a $changeStream pipeline"},
		"unknown stage": {"d", "c", []bson.D{cs(bson.D{}), {{Key: "$foo", Value: 1}}},
			codeUnknownStage, "Unrecognized pipeline stage name: '$foo'"},
		"split not last": {"d", "c", []bson.D{cs(bson.D{}), {{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}, {{Key: "$match", Value: bson.D{}}}},
			codeSplitNotLast, "must be the last stage"},
		"split with argument": {"d", "c", []bson.D{cs(bson.D{}), {{Key: "$changeStreamSplitLargeEvent", Value: bson.D{{Key: "x", Value: 1}}}}},
			codeSplitBadArgument, "empty document"},
		"two fields in a stage": {"d", "c", []bson.D{cs(bson.D{}), {{Key: "$match", Value: bson.D{}}, {Key: "$project", Value: bson.D{}}}},
			codeStageFieldCount, "exactly one field"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.db, tc.coll, stages(t, tc.pipeline...))
			e, ok := mongoerr.As(err)
			if !ok {
				t.Fatalf("got %v, want code %d", err, tc.wantCode)
			}
			if e.Code != tc.wantCode || !strings.Contains(e.Message, tc.wantMsg) {
				t.Errorf("got %d %q, want %d containing %q", e.Code, e.Message, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := map[string]struct {
		db, coll  string
		pipeline  []bson.D
		wantLevel Level
		check     func(t *testing.T, s *Spec)
	}{
		"collection defaults": {"d", "c", []bson.D{cs(bson.D{})}, CollectionLevel, func(t *testing.T, s *Spec) {
			if s.FullDocument != FullDocDefault || s.FullDocumentBeforeChange != FullDocOff || s.ShowExpandedEvents {
				t.Errorf("defaults: %+v", s)
			}
		}},
		"database": {"d", "", []bson.D{cs(bson.D{{Key: "fullDocument", Value: "updateLookup"}})}, DatabaseLevel, func(t *testing.T, s *Spec) {
			if s.FullDocument != FullDocUpdateLookup {
				t.Errorf("fullDocument = %q", s.FullDocument)
			}
		}},
		"cluster": {"admin", "", []bson.D{cs(bson.D{{Key: "allChangesForCluster", Value: true}, {Key: "showExpandedEvents", Value: true}})}, ClusterLevel, func(t *testing.T, s *Spec) {
			if !s.ShowExpandedEvents {
				t.Error("showExpandedEvents not set")
			}
		}},
		"followers and split": {"d", "c", []bson.D{cs(bson.D{{Key: "startAtOperationTime", Value: bson.Timestamp{T: 7, I: 1}}}),
			{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}},
			{{Key: "$project", Value: bson.D{{Key: "fullDocument", Value: 1}}}},
			{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}}, CollectionLevel, func(t *testing.T, s *Spec) {
			if len(s.Stages) != 2 || !s.SplitLargeEvents {
				t.Errorf("stages %d, split %v", len(s.Stages), s.SplitLargeEvents)
			}
			if *s.StartAtOperationTime != (bson.Timestamp{T: 7, I: 1}) {
				t.Errorf("startAtOperationTime = %v", s.StartAtOperationTime)
			}
		}},
		"startAfter invalidate": {"d", "c", []bson.D{cs(bson.D{{Key: "startAfter", Value: bson.D{{Key: "_data", Value: "8200000005000000012B042C0100296F5A100400000000000000000000000000000000463C6F7065726174696F6E54797065003C64726F70000004"}}}})},
			CollectionLevel, func(t *testing.T, s *Spec) {
				if s.StartAfter == nil || !s.StartAfter.FromInvalidate {
					t.Errorf("startAfter = %+v", s.StartAfter)
				}
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.db, tc.coll, stages(t, tc.pipeline...))
			if err != nil {
				t.Fatal(err)
			}
			if s.Level != tc.wantLevel {
				t.Errorf("level %d, want %d", s.Level, tc.wantLevel)
			}
			tc.check(t, s)
		})
	}
}

func TestIsChangeStream(t *testing.T) {
	if !IsChangeStream(stages(t, bson.D{{Key: "$match", Value: bson.D{}}}, cs(bson.D{}))) {
		t.Error("a misplaced $changeStream must still be routed to change streams")
	}
	if IsChangeStream(stages(t, bson.D{{Key: "$match", Value: bson.D{}}})) {
		t.Error("a plain pipeline is not a change stream")
	}
}

// FuzzParse feeds arbitrary documents as $changeStream options and
// following stages: Parse must refuse or accept them, never panic.
func FuzzParse(f *testing.F) {
	seed := func(d bson.D) []byte {
		b, _ := bson.Marshal(d)
		return b
	}
	f.Add(seed(bson.D{}), seed(bson.D{{Key: "$match", Value: bson.D{}}}))
	f.Add(seed(bson.D{{Key: "fullDocument", Value: "updateLookup"}, {Key: "resumeAfter", Value: bson.D{{Key: "_data", Value: realInsertToken}}}}),
		seed(bson.D{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}))
	f.Add(seed(bson.D{{Key: "startAfter", Value: bson.D{{Key: "_data", Value: realHWMToken}}}, {Key: "showExpandedEvents", Value: true}}),
		seed(bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}}}}))
	f.Fuzz(func(t *testing.T, opts, follow []byte) {
		if bson.Raw(opts).Validate() != nil || bson.Raw(follow).Validate() != nil {
			return
		}
		st, err := bson.Marshal(bson.D{{Key: "$changeStream", Value: bson.Raw(opts)}})
		if err != nil {
			return
		}
		for _, coll := range []string{"c", ""} {
			if _, err := Parse("d", coll, []bson.Raw{st, follow}); err != nil {
				if _, ok := mongoerr.As(err); !ok {
					t.Fatalf("error without a MongoDB code: %v", err)
				}
			}
		}
	})
}
