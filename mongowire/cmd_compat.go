package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// commandAliases are the other names mongod answers its commands by: old
// tools (mongorestore, the legacy shell) send the lower-case ones.
var commandAliases = map[string]string{
	"ismaster":      "isMaster",
	"buildinfo":     "buildInfo",
	"dbstats":       "dbStats",
	"collstats":     "collStats",
	"findandmodify": "findAndModify",
}

// canonicalCommand returns the command's own name for an alias.
func canonicalCommand(name string) string {
	if n, ok := commandAliases[name]; ok {
		return n
	}
	return name
}

// apiV1 are the commands of Stable API version 1 (MongoDB 7.0).
var apiV1 = map[string]bool{
	"abortTransaction": true, "aggregate": true, "authenticate": true, "collMod": true,
	"commitTransaction": true, "count": true, "create": true, "createIndexes": true,
	"delete": true, "drop": true, "dropDatabase": true, "dropIndexes": true,
	"endSessions": true, "explain": true, "find": true, "findAndModify": true,
	"getMore": true, "hello": true, "insert": true, "killCursors": true,
	"listCollections": true, "listDatabases": true, "listIndexes": true, "ping": true,
	"refreshSessions": true, "saslContinue": true, "saslStart": true, "update": true,
	// mongod's test commands for the Stable API (--enable-test-commands).
	"testVersion1And2": true, "testDeprecation": true,
}

// apiV1Deprecated are the commands of version 1 that apiDeprecationErrors
// refuses: only mongod's test command.
var apiV1Deprecated = map[string]bool{"testDeprecation": true}

// apiV1NeverStages are the aggregation stages mongod refuses under
// apiStrict in version 1 (AllowedWithApiStrict::kNeverInVersion1).
var apiV1NeverStages = map[string]bool{
	"$currentOp": true, "$indexStats": true, "$listLocalSessions": true, "$listSessions": true,
	"$planCacheStats": true, "$listCatalog": true,
}

// cmdAPITest answers mongod's Stable API test commands (testVersion2,
// testVersion1And2, testDeprecation): they only succeed, once
// checkAPIParameters has let them through.
func (s *Server) cmdAPITest(context.Context, *conn, *request) (bson.D, error) {
	return bson.D{}, nil
}

// checkAPIParameters validates apiVersion, apiStrict and
// apiDeprecationErrors as mongod 7.0 does. No command of version 1 is
// deprecated, so apiDeprecationErrors never fails a command once valid.
// Under apiStrict, the top-level stages of an aggregate are checked too.
func checkAPIParameters(name string, cmd bson.Raw) error {
	var version string
	hasVersion, strict, deprecationErrors, given := false, false, false, false
	for _, f := range [...]string{"apiVersion", "apiStrict", "apiDeprecationErrors"} {
		v, err := cmd.LookupErr(f)
		if err != nil {
			continue
		}
		if f == "apiVersion" {
			s, ok := v.StringValueOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'apiVersion' is the wrong type '%s', expected type 'string'", typeName(v.Type))
			}
			version, hasVersion = s, true
			continue
		}
		b, ok := v.BooleanOK()
		if !ok {
			return mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'bool'", f, typeName(v.Type))
		}
		given = true // even false: mongod checks presence
		if f == "apiStrict" {
			strict = b
		} else {
			deprecationErrors = b
		}
	}
	switch {
	case given && !hasVersion:
		return mongoerr.New(4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
	case hasVersion && version != "1":
		return mongoerr.New(mongoerr.APIVersionError, "API version must be \"1\"")
	case strict && !apiV1[name]:
		return mongoerr.New(mongoerr.APIStrictError,
			"Provided apiStrict:true, but the command %s is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://dochub.mongodb.org/core/manual-versioned-api", name)
	case deprecationErrors && apiV1Deprecated[name]:
		return mongoerr.New(mongoerr.APIDeprecationError,
			"Provided apiDeprecationErrors:true, but the command %s is deprecated in API Version 1", name)
	case strict && name == "aggregate":
		arr, _ := cmd.Lookup("pipeline").ArrayOK()
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				if st, err := d.IndexErr(0); err == nil && apiV1NeverStages[st.Key()] {
					return mongoerr.New(mongoerr.APIStrictError, "%s is not allowed with 'apiStrict: true' in API Version 1", st.Key())
				}
			}
		}
	}
	return nil
}

// errSearchNotEnabled is mongod's answer, outside Atlas, to the search
// index commands and $listSearchIndexes.
var errSearchNotEnabled = mongoerr.New(mongoerr.SearchNotEnabled,
	"Using Atlas Search Database Commands and the $listSearchIndexes aggregation stage requires additional configuration. "+
		"Please connect to Atlas or an AtlasCLI local deployment to enable. For more information on how to connect, see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs")

// cmdSearchIndex answers createSearchIndexes, updateSearchIndex and
// dropSearchIndex as a mongod without Atlas Search does.
func (s *Server) cmdSearchIndex(_ context.Context, _ *conn, r *request) (bson.D, error) {
	if _, err := collNS(r); err != nil {
		return nil, err
	}
	return nil, errSearchNotEnabled
}

// refuseSearchStage refuses the Atlas-only stages of a pipeline.
func refuseSearchStage(stages []bson.Raw) error {
	for _, st := range stages {
		switch st.Index(0).Key() {
		case "$listSearchIndexes", "$search", "$searchMeta", "$vectorSearch":
			return errSearchNotEnabled
		}
	}
	return nil
}
