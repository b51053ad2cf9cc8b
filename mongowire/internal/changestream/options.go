package changestream

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Level is what a stream watches.
type Level int

// Stream levels (mongo-reference.md §3.1).
const (
	CollectionLevel Level = iota // aggregate: "c" — one namespace
	DatabaseLevel                // aggregate: 1 — every collection of a database
	ClusterLevel                 // aggregate: 1 on admin, allChangesForCluster
)

// fullDocument and fullDocumentBeforeChange modes.
const (
	FullDocDefault       = "default"
	FullDocUpdateLookup  = "updateLookup"
	FullDocWhenAvailable = "whenAvailable"
	FullDocRequired      = "required"
	FullDocOff           = "off"
)

// Assertion codes MongoDB reports only by number.
const (
	codeNotFirstStage     int32 = 40602 // $changeStream not the first stage
	codeSpecNotObject     int32 = 50808 // $changeStream argument not a document
	codeResumeAndStart    int32 = 50865 // resumeAfter with startAfter
	codeTwoResumeOptions  int32 = 40674 // a token with startAtOperationTime
	codeStageFieldCount   int32 = 40323 // a stage with other than one field
	codeUnknownStage      int32 = 40324
	codeSplitNotLast      int32 = 7182802
	codeSplitBadArgument  int32 = 7182800
	codeStageNotPermitted       = mongoerr.IllegalOperation
	labelNonResumable           = "NonResumableChangeStreamError"
	labelResumable              = "ResumableChangeStreamError"
)

// Spec is a validated $changeStream pipeline: the stage's options and the
// stages that follow it.
type Spec struct {
	Level Level
	DB    string
	Coll  string // collection streams only

	FullDocument             string // FullDocDefault when not given
	FullDocumentBeforeChange string // FullDocOff when not given
	ShowExpandedEvents       bool

	// At most one start point is set; none means "after the newest write".
	ResumeAfter          *Token
	StartAfter           *Token
	StartAtOperationTime *bson.Timestamp

	// Stages are the stages after $changeStream, without a final
	// $changeStreamSplitLargeEvent, which sets SplitLargeEvents instead.
	Stages           []bson.Raw
	SplitLargeEvents bool
	pipeline         *mql.Pipeline
}

// IsChangeStream reports whether an aggregate pipeline holds a
// $changeStream stage anywhere, so that the server routes it here (where a
// misplaced one gets its proper error).
func IsChangeStream(pipeline []bson.Raw) bool {
	for _, st := range pipeline {
		if el, err := st.IndexErr(0); err == nil && el.Key() == "$changeStream" {
			return true
		}
	}
	return false
}

// knownStages are the aggregation stage names MongoDB 7.0 recognises; a
// known stage after $changeStream is refused with 20, an unknown one with
// 40324, as mongod does.
var knownStages = map[string]bool{
	"$addFields": true, "$bucket": true, "$bucketAuto": true, "$changeStream": true,
	"$changeStreamSplitLargeEvent": true, "$collStats": true, "$count": true, "$currentOp": true,
	"$densify": true, "$documents": true, "$facet": true, "$fill": true, "$geoNear": true,
	"$graphLookup": true, "$group": true, "$indexStats": true, "$limit": true,
	"$listLocalSessions": true, "$listSearchIndexes": true, "$listSessions": true, "$lookup": true,
	"$match": true, "$merge": true, "$out": true, "$planCacheStats": true, "$project": true,
	"$redact": true, "$replaceRoot": true, "$replaceWith": true, "$sample": true, "$search": true,
	"$searchMeta": true, "$set": true, "$setWindowFields": true, "$skip": true, "$sort": true,
	"$sortByCount": true, "$unionWith": true, "$unset": true, "$unwind": true, "$vectorSearch": true,
}

// followers are the stages allowed after $changeStream.
var followers = map[string]bool{
	"$match": true, "$project": true, "$addFields": true, "$set": true, "$unset": true,
	"$replaceRoot": true, "$replaceWith": true, "$redact": true,
}

// Parse validates a change-stream aggregate: db is the command's database,
// coll the collection ("" for aggregate: 1), pipeline its stages. Errors
// carry MongoDB's codes and messages.
func Parse(db, coll string, pipeline []bson.Raw) (*Spec, error) {
	names := make([]string, len(pipeline))
	for i, st := range pipeline {
		elems, err := st.Elements()
		if err != nil {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "pipeline stage %d: %v", i, err)
		}
		if len(elems) != 1 {
			return nil, mongoerr.New(codeStageFieldCount, "A pipeline stage specification object must contain exactly one field.")
		}
		names[i] = elems[0].Key()
		if !knownStages[names[i]] {
			return nil, mongoerr.New(codeUnknownStage, "Unrecognized pipeline stage name: '%s'", names[i])
		}
	}
	if len(pipeline) == 0 || names[0] != "$changeStream" {
		return nil, mongoerr.New(codeNotFirstStage, "$changeStream is only valid as the first stage in a pipeline")
	}
	arg := pipeline[0].Index(0).Value()
	opts, ok := arg.DocumentOK()
	if !ok {
		return nil, mongoerr.New(codeSpecNotObject, "$changeStream stage expects a document as argument")
	}
	s := &Spec{DB: db, Coll: coll, FullDocument: FullDocDefault, FullDocumentBeforeChange: FullDocOff}
	if err := s.parseOptions(opts); err != nil {
		return nil, err
	}
	if err := s.checkNamespace(); err != nil {
		return nil, err
	}
	if err := s.checkStartPoint(); err != nil {
		return nil, err
	}
	for i := 1; i < len(pipeline); i++ {
		switch name := names[i]; {
		case name == "$changeStream":
			return nil, mongoerr.New(codeNotFirstStage, "$changeStream is only valid as the first stage in a pipeline")
		case name == "$changeStreamSplitLargeEvent":
			if i != len(pipeline)-1 {
				return nil, mongoerr.New(codeSplitNotLast, "$changeStreamSplitLargeEvent must be the last stage in the pipeline")
			}
			if d, ok := pipeline[i].Index(0).Value().DocumentOK(); !ok || len(d) != 5 {
				return nil, mongoerr.New(codeSplitBadArgument, "$changeStreamSplitLargeEvent stage expects an empty document as argument")
			}
			s.SplitLargeEvents = true
		case !followers[name]:
			return nil, mongoerr.New(codeStageNotPermitted, "%s is not permitted in a $changeStream pipeline", name)
		default:
			s.Stages = append(s.Stages, pipeline[i])
		}
	}
	if t := s.resumeToken(); t != nil && t.Split && !s.SplitLargeEvents {
		return nil, mongoerr.New(mongoerr.ChangeStreamFatalError,
			"To resume from a split event, the $changeStream pipeline must end with a $changeStreamSplitLargeEvent stage")
	}
	if len(s.Stages) > 0 {
		p, err := mql.CompilePipeline(s.Stages)
		if err != nil {
			return nil, err
		}
		s.pipeline = p
	}
	return s, nil
}

func (s *Spec) resumeToken() *Token {
	if s.ResumeAfter != nil {
		return s.ResumeAfter
	}
	return s.StartAfter
}

func wrongType(field string, got bson.Type, want string) error {
	return mongoerr.New(mongoerr.TypeMismatch,
		"BSON field '$changeStream.%s' is the wrong type '%s', expected type '%s'", field, typeName(got), want)
}

func (s *Spec) parseOptions(opts bson.Raw) error {
	elems, err := opts.Elements()
	if err != nil {
		return mongoerr.New(mongoerr.InvalidBSON, "$changeStream: %v", err)
	}
	var allChanges bool
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		switch key {
		case "fullDocument", "fullDocumentBeforeChange":
			str, ok := v.StringValueOK()
			if !ok {
				return wrongType(key, v.Type, "string")
			}
			valid := []string{FullDocDefault, FullDocUpdateLookup, FullDocWhenAvailable, FullDocRequired}
			if key == "fullDocumentBeforeChange" {
				valid = []string{FullDocOff, FullDocWhenAvailable, FullDocRequired}
			}
			if !contains(valid, str) {
				return mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$changeStream.%s' is not a valid value.", str, key)
			}
			if key == "fullDocument" {
				s.FullDocument = str
			} else {
				s.FullDocumentBeforeChange = str
			}
		case "resumeAfter", "startAfter":
			t, err := ParseToken(key, v)
			if err != nil {
				return err
			}
			if key == "resumeAfter" {
				s.ResumeAfter = &t
			} else {
				s.StartAfter = &t
			}
		case "startAtOperationTime":
			if v.Type != bson.TypeTimestamp {
				return wrongType(key, v.Type, "timestamp")
			}
			t, i := v.Timestamp()
			s.StartAtOperationTime = &bson.Timestamp{T: t, I: i}
		case "allChangesForCluster", "showExpandedEvents":
			b, ok := v.BooleanOK()
			if !ok {
				return wrongType(key, v.Type, "bool")
			}
			if key == "allChangesForCluster" {
				allChanges = b
			} else {
				s.ShowExpandedEvents = b
			}
		default:
			return mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$changeStream.%s' is an unknown field.", key)
		}
	}
	switch {
	case allChanges:
		s.Level = ClusterLevel
	case s.Coll == "":
		s.Level = DatabaseLevel
	default:
		s.Level = CollectionLevel
	}
	return nil
}

func (s *Spec) checkNamespace() error {
	if s.Level == ClusterLevel {
		if s.DB != "admin" || s.Coll != "" {
			ns := s.DB
			if s.Coll != "" {
				ns += "." + s.Coll
			}
			return mongoerr.New(mongoerr.InvalidOptions,
				"A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found %s", ns)
		}
		return nil
	}
	switch s.DB {
	case "admin", "local", "config":
		return mongoerr.New(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", s.DB)
	}
	if strings.HasPrefix(s.Coll, "system.") {
		return mongoerr.New(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s.%s collection", s.DB, s.Coll)
	}
	return nil
}

func (s *Spec) checkStartPoint() error {
	if s.ResumeAfter != nil && s.StartAfter != nil {
		return mongoerr.New(codeResumeAndStart, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
	}
	tok := s.resumeToken()
	if tok != nil && s.StartAtOperationTime != nil {
		return mongoerr.New(codeTwoResumeOptions, "Only one type of resume option is allowed, but multiple were found.")
	}
	if s.ResumeAfter != nil && s.ResumeAfter.FromInvalidate {
		return mongoerr.New(mongoerr.InvalidResumeToken,
			"Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.")
	}
	if tok != nil && s.Level == CollectionLevel && tok.Type == EventToken && tok.UUID == nil {
		return mongoerr.New(mongoerr.InvalidResumeToken,
			"Attempted to resume a single-collection stream, but the resume token does not include a UUID.")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
