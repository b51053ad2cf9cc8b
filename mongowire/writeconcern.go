package mongowire

import "go.mongodb.org/mongo-driver/v2/bson"

// Write-concern failures of a single-node replica set.
const (
	codeUnknownReplWriteConcern   int32 = 79
	codeUnsatisfiableWriteConcern int32 = 100
)

// writeConcernCommands are the commands that wait for their write concern
// after writing.
var writeConcernCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true,
	"create": true, "drop": true, "dropDatabase": true, "createIndexes": true,
	"dropIndexes": true, "renameCollection": true, "collMod": true,
}

// journaled reports whether cmd's write concern asks for its writes to be
// on disk before the reply. That is j: true, or w: "majority": with
// writeConcernMajorityJournalDefault true, as replSetGetConfig says, a
// majority write is acknowledged only once journaled. A command without a
// w gets the default write concern, which getDefaultRWConcern reports as
// w: "majority", as mongod 7.0's implicit default on a replica set is, so
// it too waits for the journal. w: 0 waits for nothing: nobody awaits the
// reply. w: 1 without j is acknowledged once applied in memory and
// written to the operating system.
func journaled(cmd bson.Raw) bool {
	wc, ok := cmd.Lookup("writeConcern").DocumentOK()
	if !ok {
		return true
	}
	w, err := wc.LookupErr("w")
	if n, ok := w.AsInt64OK(); err == nil && ok && n == 0 {
		return false
	}
	if j, err := wc.LookupErr("j"); err == nil && truthy(j) {
		return true
	}
	if err != nil {
		return true // the default w, majority
	}
	mode, ok := w.StringValueOK()
	return ok && mode == "majority"
}

// writeConcernError is what mongod appends to a successful write whose
// write concern this one-member replica set cannot satisfy: w greater than
// 1 (100 UnsatisfiableWriteConcern) or a tag set other than "majority" (79
// UnknownReplWriteConcern). The write itself is applied, as in mongod,
// which checks this while waiting for replication. Nil when the write
// concern is satisfied (w 0, 1, "majority", or none).
func writeConcernError(cmd bson.Raw) bson.D {
	wc, ok := cmd.Lookup("writeConcern").DocumentOK()
	if !ok {
		return nil
	}
	w, err := wc.LookupErr("w")
	if err != nil {
		return nil
	}
	var e bson.D
	if mode, ok := w.StringValueOK(); ok {
		if mode == "majority" {
			return nil
		}
		e = bson.D{{Key: "code", Value: codeUnknownReplWriteConcern}, {Key: "codeName", Value: "UnknownReplWriteConcern"},
			{Key: "errmsg", Value: "No write concern mode named '" + mode + "' found in replica set configuration"}}
	} else if n, ok := w.AsInt64OK(); ok && n > 1 {
		e = bson.D{{Key: "code", Value: codeUnsatisfiableWriteConcern}, {Key: "codeName", Value: "UnsatisfiableWriteConcern"},
			{Key: "errmsg", Value: "Not enough data-bearing nodes"}}
	} else {
		return nil
	}
	given := bson.D{{Key: "w", Value: w}}
	if wt, err := wc.LookupErr("wtimeout"); err == nil {
		given = append(given, bson.E{Key: "wtimeout", Value: wt})
	} else {
		given = append(given, bson.E{Key: "wtimeout", Value: int32(0)})
	}
	if j, err := wc.LookupErr("j"); err == nil {
		given = append(given, bson.E{Key: "j", Value: j})
	}
	given = append(given, bson.E{Key: "provenance", Value: "clientSupplied"})
	return append(e, bson.E{Key: "errInfo", Value: bson.D{{Key: "writeConcern", Value: given}}})
}
