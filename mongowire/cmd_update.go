package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdUpdate: {update: "c", updates: [{q, u, upsert, multi, arrayFilters}], ordered}
// -> {n, nModified, upserted?, writeErrors?}.
func (s *Server) cmdUpdate(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	stmts, ordered, err := writeBatch(r, "updates")
	if err != nil {
		return nil, err
	}
	// The statements are parsed before any runs: a malformed one fails
	// the whole command, as mongod's IDL parser does; execution failures
	// are per-statement write errors.
	let, err := commandLet(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	bypass := a.bool("bypassDocumentValidation")
	if a.err != nil {
		return nil, a.err
	}
	specs := make([]store.UpdateSpec, len(stmts))
	for i, stmt := range stmts {
		if specs[i], err = parseUpdateStatement(stmt); err != nil {
			return nil, err
		}
		if err = letUpdateSpec(&specs[i], let); err != nil {
			return nil, err
		}
		specs[i].BypassValidation = bypass
	}
	var (
		n, modified int
		upserted    bson.A
		writeErrs   bson.A
	)
	for i, spec := range specs {
		switch err = s.statementHint(ns, stmts[i]); {
		case err != nil:
		case spec.Multi && spec.Update.Type == bson.TypeEmbeddedDocument && isReplacement(spec.Update.Document()):
			err = mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
		default:
			var res store.UpdateResult
			if res, err = s.data(ctx).Update(ns, spec); err == nil {
				n += res.Matched
				modified += res.Modified
				if res.UpsertedID.Type != 0 {
					n++
					upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.UpsertedID}})
				}
				continue
			}
		}
		writeErrs = append(writeErrs, writeErrorDoc(i, asMongoErr(err)))
		if ordered {
			break
		}
	}
	reply := bson.D{{Key: "n", Value: int32(n)}, {Key: "nModified", Value: int32(modified)}}
	if len(upserted) > 0 {
		reply = append(reply, bson.E{Key: "upserted", Value: upserted})
	}
	if len(writeErrs) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrs})
	}
	return reply, nil
}

func parseUpdateStatement(stmt bson.Raw) (store.UpdateSpec, error) {
	if err := updateStatementFields.check("update.updates", stmt, false); err != nil {
		return store.UpdateSpec{}, err
	}
	a := &args{name: "update.updates", cmd: stmt}
	spec := store.UpdateSpec{
		Filter:       a.doc("q"),
		ArrayFilters: a.docs("arrayFilters"),
		Upsert:       a.bool("upsert"),
		Multi:        a.bool("multi"),
		Collation:    collationArg(stmt),
	}
	if a.err != nil {
		return spec, a.err
	}
	if spec.Filter == nil {
		return spec, missingField("update.updates.q")
	}
	u, err := stmt.LookupErr("u")
	if err != nil {
		return spec, missingField("update.updates.u")
	}
	switch u.Type {
	case bson.TypeEmbeddedDocument:
	case bson.TypeArray:
		if err := mql.CheckStageNames(u); err != nil {
			return spec, err
		}
	default:
		return spec, mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
	}
	spec.Update = u
	return spec, nil
}

// isReplacement reports whether an update document is a replacement
// (its first field is not a $-operator).
func isReplacement(u bson.Raw) bool {
	e, err := u.IndexErr(0)
	return err != nil || len(e.Key()) == 0 || e.Key()[0] != '$'
}
