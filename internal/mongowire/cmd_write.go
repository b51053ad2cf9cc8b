package mongowire

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
	"github.com/tide-cdc/tide/internal/mongowire/store"
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
		return nil, false, mongoerr.New(mongoerr.FailedToParse, "BSON field '%s.%s' is missing but a required field", r.name, field)
	}
	if len(docs) == 0 || len(docs) > maxWriteBatchSize {
		return nil, false, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", maxWriteBatchSize, len(docs))
	}
	return docs, ordered, nil
}

func writeErrorDoc(index int, e *mongoerr.Error) bson.D {
	d := bson.D{
		{Key: "index", Value: int32(index)},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: e.CodeName},
		{Key: "errmsg", Value: e.Message},
	}
	return append(d, e.Info...)
}

// cmdInsert: {insert: "c", documents: [...], ordered} -> {n, writeErrors?}.
func (s *Server) cmdInsert(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	docs, ordered, err := writeBatch(r, "documents")
	if err != nil {
		return nil, err
	}
	n, errs := s.insert(ns, docs, ordered)
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(errs) > 0 {
		we := make(bson.A, len(errs))
		for i, e := range errs {
			we[i] = writeErrorDoc(e.Index, e.Err)
		}
		reply = append(reply, bson.E{Key: "writeErrors", Value: we})
	}
	return reply, nil
}

// insert refuses documents over the 16 MiB BSON limit (a message may carry
// up to 48 MB) and hands the rest to the store, keeping the statement
// indexes and the ordered semantics of the whole batch.
func (s *Server) insert(ns store.Namespace, docs []bson.Raw, ordered bool) (int, []store.WriteError) {
	var (
		ok      []bson.Raw
		indexes []int
		errs    []store.WriteError
	)
	for i, d := range docs {
		if len(d) > maxBSONObjectSize {
			errs = append(errs, store.WriteError{Index: i, Err: mongoerr.New(mongoerr.BSONObjectTooLarge,
				"object to insert too large. size in bytes: %d, max size: %d", len(d), maxBSONObjectSize)})
			if ordered {
				break
			}
			continue
		}
		ok = append(ok, d)
		indexes = append(indexes, i)
	}
	if len(errs) == 0 {
		return s.store.Insert(ns, docs, ordered)
	}
	if len(ok) == 0 {
		return 0, errs
	}
	n, storeErrs := s.store.Insert(ns, ok, ordered)
	if ordered && len(storeErrs) > 0 {
		errs = nil // the store stopped before the oversized document
	}
	for _, e := range storeErrs {
		e.Index = indexes[e.Index]
		errs = append(errs, e)
	}
	slices.SortFunc(errs, func(a, b store.WriteError) int { return a.Index - b.Index })
	return n, errs
}

// cmdUpdate: {update: "c", updates: [{q, u, upsert, multi, arrayFilters}], ordered}
// -> {n, nModified, upserted?, writeErrors?}.
func (s *Server) cmdUpdate(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	stmts, ordered, err := writeBatch(r, "updates")
	if err != nil {
		return nil, err
	}
	var (
		n, modified int
		upserted    bson.A
		writeErrs   bson.A
	)
	for i, stmt := range stmts {
		spec, err := parseUpdateStatement(stmt)
		if err == nil {
			var res store.UpdateResult
			res, err = s.store.Update(ns, spec)
			if err == nil {
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
	a := &args{name: "update.updates", cmd: stmt}
	spec := store.UpdateSpec{
		Filter:       a.doc("q"),
		ArrayFilters: a.docs("arrayFilters"),
		Upsert:       a.bool("upsert"),
		Multi:        a.bool("multi"),
	}
	if a.err != nil {
		return spec, a.err
	}
	if spec.Filter == nil {
		return spec, mongoerr.New(mongoerr.FailedToParse, "BSON field 'update.updates.q' is missing but a required field")
	}
	u, err := stmt.LookupErr("u")
	if err != nil {
		return spec, mongoerr.New(mongoerr.FailedToParse, "BSON field 'update.updates.u' is missing but a required field")
	}
	switch u.Type {
	case bson.TypeEmbeddedDocument:
		if spec.Multi && isReplacement(u.Document()) {
			return spec, mongoerr.New(mongoerr.FailedToParse, "multi update is not supported for replacement-style update")
		}
	case bson.TypeArray:
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

// cmdDelete: {delete: "c", deletes: [{q, limit}], ordered} -> {n, writeErrors?}.
func (s *Server) cmdDelete(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	stmts, ordered, err := writeBatch(r, "deletes")
	if err != nil {
		return nil, err
	}
	var (
		n         int
		writeErrs bson.A
	)
	for i, stmt := range stmts {
		a := &args{name: "delete.deletes", cmd: stmt}
		q := a.doc("q")
		limit, hasLimit := a.int64("limit")
		err := a.err
		switch {
		case err != nil:
		case q == nil:
			err = mongoerr.New(mongoerr.FailedToParse, "BSON field 'delete.deletes.q' is missing but a required field")
		case !hasLimit:
			err = mongoerr.New(mongoerr.FailedToParse, "BSON field 'delete.deletes.limit' is missing but a required field")
		case limit != 0 && limit != 1:
			err = mongoerr.New(mongoerr.FailedToParse, "The limit field in delete objects must be 0 or 1. Got %d", limit)
		default:
			var k int
			if k, err = s.store.Delete(ns, q, int(limit)); err == nil {
				n += k
				continue
			}
		}
		writeErrs = append(writeErrs, writeErrorDoc(i, asMongoErr(err)))
		if ordered {
			break
		}
	}
	reply := bson.D{{Key: "n", Value: int32(n)}}
	if len(writeErrs) > 0 {
		reply = append(reply, bson.E{Key: "writeErrors", Value: writeErrs})
	}
	return reply, nil
}

// cmdFindAndModify: {findAndModify: "c", query, sort, remove, update, new,
// fields, upsert, arrayFilters} -> {lastErrorObject: {n, updatedExisting,
// upserted?}, value}.
func (s *Server) cmdFindAndModify(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	spec := store.FindAndModifySpec{
		Filter:       a.doc("query"),
		Sort:         a.doc("sort"),
		Fields:       a.doc("fields"),
		Remove:       a.bool("remove"),
		New:          a.bool("new"),
		Upsert:       a.bool("upsert"),
		ArrayFilters: a.docs("arrayFilters"),
	}
	if a.err != nil {
		return nil, a.err
	}
	u, hasUpdate := a.lookup("update")
	switch {
	case spec.Remove && hasUpdate:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both an update and remove=true")
	case !spec.Remove && !hasUpdate:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Either an update or remove=true must be specified")
	case spec.Remove && spec.New:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	case spec.Remove && spec.Upsert:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Cannot specify both upsert=true and remove=true")
	case hasUpdate && u.Type != bson.TypeEmbeddedDocument && u.Type != bson.TypeArray:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
	}
	spec.Update = u
	res, err := s.store.FindAndModify(ns, spec)
	if err != nil {
		return nil, err
	}
	leo := bson.D{{Key: "n", Value: int32(res.N)}}
	if !spec.Remove {
		leo = append(leo, bson.E{Key: "updatedExisting", Value: res.UpdatedExisting})
		if res.Upserted.Type != 0 {
			leo = append(leo, bson.E{Key: "upserted", Value: res.Upserted})
		}
	}
	var value any // nil encodes as null
	if res.Value != nil {
		value = res.Value
	}
	return bson.D{{Key: "lastErrorObject", Value: leo}, {Key: "value", Value: value}}, nil
}
