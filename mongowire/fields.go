package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// MongoDB's IDL parser codes: a required field that is absent, and a field
// the command does not define (codeName "Location<code>" on 7.0).
const (
	codeMissingField int32 = 40414
	codeUnknownField int32 = 40415
)

// missingField is the IDL parser's error for an absent required field;
// path is "<command>.<field>" or deeper ("update.updates.q").
func missingField(path string) *mongoerr.Error {
	return mongoerr.New(codeMissingField, "BSON field '%s' is missing but a required field", path)
}

// fieldSet lists the fields a command (or a statement in it) defines,
// besides its first field and the generic fields every command takes.
type fieldSet map[string]bool

func newFieldSet(names ...string) fieldSet {
	s := make(fieldSet, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}

// check refuses a field of doc that the set does not define, as mongod's
// IDL parser does: 40415 "BSON field 'find.foo' is an unknown field.".
// Top-level commands skip their first field and the generic fields;
// statements (top false) check every field.
func (s fieldSet) check(path string, doc bson.Raw, top bool) error {
	elems, err := doc.Elements()
	if err != nil {
		return nil // structure was validated on the wire; nothing to name
	}
	for i, e := range elems {
		k := e.Key()
		if top && (i == 0 || isGenericField(k)) || s[k] {
			continue
		}
		return mongoerr.New(codeUnknownField, "BSON field '%s.%s' is an unknown field.", path, k)
	}
	return nil
}

// The fields of the commands whose unknown fields are refused, as
// MongoDB 7.0's IDL defines them (internal and sharding fields included,
// so that nothing a real client may send is refused).
var (
	writeCommandFields = []string{"ordered", "bypassDocumentValidation", "stmtId", "stmtIds",
		"isTimeseriesNamespace", "collectionUUID", "encryptionInformation", "bypassEmptyTsReplacement"}
	commandFields = map[string]fieldSet{
		"find": newFieldSet("filter", "projection", "sort", "hint", "skip", "limit", "batchSize",
			"singleBatch", "max", "min", "returnKey", "showRecordId", "tailable", "oplogReplay",
			"noCursorTimeout", "awaitData", "allowPartialResults", "collation", "allowDiskUse", "let",
			"readOnce", "allowSpeculativeMajorityRead", "$_requestResumeToken", "$_resumeAfter",
			"$_startAt", "term", "includeQueryStatsMetrics", "encryptionInformation", "ntoreturn",
			"$queryOptions", "runtimeConstants", "isSearchQuery"),
		"getMore": newFieldSet("collection", "batchSize", "term", "lastKnownCommittedOpTime",
			"includeQueryStatsMetrics"),
		"insert": newFieldSet(append([]string{"documents"}, writeCommandFields...)...),
		"update": newFieldSet(append([]string{"updates", "let", "runtimeConstants"}, writeCommandFields...)...),
		"delete": newFieldSet(append([]string{"deletes", "let", "runtimeConstants"}, writeCommandFields...)...),
		"aggregate": newFieldSet("pipeline", "explain", "allowDiskUse", "cursor", "bypassDocumentValidation",
			"collation", "hint", "let", "needsMerge", "fromMongos", "fromRouter", "exchange",
			"runtimeConstants", "isMapReduceCommand", "collectionUUID", "passthroughToShard",
			"encryptionInformation", "$_requestReshardingResumeToken", "$_generateV2ResumeTokens",
			"includeQueryStatsMetrics", "isClusterQueryWithoutShardKeyCmd"),
		"count": newFieldSet("query", "limit", "skip", "hint", "collation", "fields",
			"encryptionInformation", "mirrored", "sampleId", "$queryOptions"),
		"distinct": newFieldSet("key", "query", "collation", "hint", "mirrored", "sampleId",
			"$queryOptions"),
		"findAndModify": newFieldSet("query", "fields", "sort", "remove", "update", "new", "upsert",
			"bypassDocumentValidation", "collation", "arrayFilters", "hint", "let", "stmtId",
			"encryptionInformation", "sampleId", "runtimeConstants",
			"$_allowShardKeyUpdatesWithoutFullShardKeyInQuery"),
		"create": newFieldSet("capped", "autoIndexId", "idIndex", "size", "max", "storageEngine",
			"validator", "validationLevel", "validationAction", "indexOptionDefaults", "viewOn",
			"pipeline", "collation", "changeStreamPreAndPostImages", "timeseries", "clusteredIndex",
			"expireAfterSeconds", "encryptedFields", "temp", "flags", "recordIdsReplicated"),
		"createIndexes": newFieldSet("indexes", "commitQuorum", "ignoreUnknownIndexOptions",
			"isTimeseriesNamespace", "collectionUUID"),
		"drop":             newFieldSet("collectionUUID"),
		"dropIndexes":      newFieldSet("index", "collectionUUID", "isTimeseriesNamespace"),
		"dropDatabase":     newFieldSet(),
		"listCollections":  newFieldSet("filter", "nameOnly", "authorizedCollections", "cursor", "includePendingDrops"),
		"listIndexes":      newFieldSet("cursor", "includeBuildUUIDs", "includeIndexBuildInfo", "isTimeseriesNamespace", "collectionUUID"),
		"listDatabases":    newFieldSet("filter", "nameOnly", "authorizedDatabases"),
		"renameCollection": newFieldSet("to", "dropTarget", "stayTemp", "collectionUUID", "targetUUID"),
		"killCursors":      newFieldSet("cursors"),

		"createUser":               newFieldSet("pwd", "roles", "customData", "mechanisms", "digestPassword"),
		"updateUser":               newFieldSet("pwd", "roles", "customData", "mechanisms", "digestPassword"),
		"dropUser":                 newFieldSet(),
		"dropAllUsersFromDatabase": newFieldSet(),
		"grantRolesToUser":         newFieldSet("roles"),
		"revokeRolesFromUser":      newFieldSet("roles"),
		"usersInfo":                newFieldSet("showCredentials", "showPrivileges", "showAuthenticationRestrictions", "showCustomData", "filter"),
		"connectionStatus":         newFieldSet("showPrivileges"),
		"rolesInfo":                newFieldSet("showBuiltinRoles", "showPrivileges", "showAuthenticationRestrictions"),
		"saslStart":                newFieldSet("mechanism", "payload", "autoAuthorize", "options"),
		"saslContinue":             newFieldSet("conversationId", "payload"),
	}
	updateStatementFields = newFieldSet("q", "u", "c", "arrayFilters", "multi", "upsert",
		"upsertSupplied", "hint", "collation", "sampleId", "$_allowShardKeyUpdatesWithoutFullShardKeyInQuery")
	deleteStatementFields = newFieldSet("q", "limit", "hint", "collation", "sampleId")
)
