package mongowire

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdApplyOps: {applyOps: [oplog entries], bypassDocumentValidation,
// alwaysUpsert} -> {applied, results}. It applies entries in the shape
// local.oplog.rs shows them (mongorestore --oplogReplay sends them back,
// and --preserveUUID creates collections through it), one at a time and
// each as the command it stands for, so every entry is checked and
// authorized as that command would be. Unlike mongod, a failure leaves
// the entries before it applied (mongod applies an all-CRUD batch
// atomically); the error names the entry that failed.
func (s *Server) cmdApplyOps(ctx context.Context, c *conn, r *request) (bson.D, error) {
	v := r.cmd.Index(0).Value()
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, typeMismatch(r.name, "applyOps", v, "array")
	}
	a := newArgs(r)
	bypass := a.bool("bypassDocumentValidation")
	alwaysUpsert := true
	if _, err := r.cmd.LookupErr("alwaysUpsert"); err == nil {
		alwaysUpsert = a.bool("alwaysUpsert")
	}
	if a.err != nil {
		return nil, a.err
	}
	for _, f := range []string{"preCondition", "allowAtomic"} {
		if _, err := r.cmd.LookupErr(f); err == nil && f == "preCondition" {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "applyOps: preCondition is not supported by this server")
		}
	}
	ops, _ := arr.Values()
	ap := applier{s: s, ctx: ctx, c: c, bypass: bypass, alwaysUpsert: alwaysUpsert}
	results := bson.A{}
	for i, ov := range ops {
		op, ok := ov.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.FailedToParse, "applyOps: entry %d is a %s, not an object", i, typeName(ov.Type))
		}
		if err := ap.apply(op); err != nil {
			e := asMongoErr(err)
			return nil, mongoerr.New(e.Code, "applyOps: entry %d (%s): %s", i, op.String(), e.Message)
		}
		results = append(results, true)
	}
	return bson.D{{Key: "applied", Value: int32(len(ops))}, {Key: "results", Value: results}}, nil
}

// applier applies oplog entries for one applyOps command.
type applier struct {
	s            *Server
	ctx          context.Context
	c            *conn
	bypass       bool
	alwaysUpsert bool
}

func (ap *applier) apply(op bson.Raw) error {
	for _, f := range []string{"op", "ns"} {
		if _, err := op.LookupErr(f); err != nil {
			return mongoerr.New(mongoerr.FailedToParse, "the oplog entry has no '%s' field", f)
		}
	}
	kind, ok := op.Lookup("op").StringValueOK()
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "the oplog entry's 'op' is not a string")
	}
	nsName, ok := op.Lookup("ns").StringValueOK()
	if !ok {
		return mongoerr.New(mongoerr.TypeMismatch, "the oplog entry's 'ns' is not a string")
	}
	if kind == "n" { // a no-op
		return nil
	}
	o, ok := op.Lookup("o").DocumentOK()
	if !ok {
		return mongoerr.New(mongoerr.FailedToParse, "the oplog entry has no object 'o'")
	}
	db, coll, _ := strings.Cut(nsName, ".")
	ns := store.Namespace{DB: db, Coll: coll}
	var ui *bson.Binary
	if v, err := op.LookupErr("ui"); err == nil {
		sub, data, ok := v.BinaryOK()
		if !ok || sub != bson.TypeBinaryUUID || len(data) != 16 {
			return mongoerr.New(mongoerr.InvalidUUID, "the oplog entry's 'ui' is not a UUID: %s", v)
		}
		ui = &bson.Binary{Subtype: sub, Data: data}
	}
	if kind == "c" {
		return ap.command(db, o, ui)
	}
	if ns == usersNS { // by name: its UUID is the source server's
		return ap.userEntry(kind, o, op)
	}
	if ui != nil { // mongod resolves a CRUD entry by its collection's UUID
		found, ok := ap.nsByUUID(*ui)
		if !ok {
			return mongoerr.New(mongoerr.NamespaceNotFound, "Failed to apply operation due to missing collection (%s)", uuidString(*ui))
		}
		ns = found
	}
	switch kind {
	case "i":
		id, err := o.LookupErr("_id")
		if err != nil {
			return mongoerr.New(mongoerr.NoSuchKey, "an insert entry's document has no _id")
		}
		// Replayed inserts are idempotent, as mongod's are: a document
		// that is already there is replaced.
		return ap.write(ns, "update", "updates", bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: id}}}, {Key: "u", Value: o}, {Key: "upsert", Value: true},
		})
	case "u":
		o2, ok := op.Lookup("o2").DocumentOK()
		if !ok {
			return mongoerr.New(mongoerr.FailedToParse, "an update entry has no object 'o2'")
		}
		return ap.update(ns, o, o2)
	case "d":
		return ap.write(ns, "delete", "deletes", bson.D{{Key: "q", Value: o}, {Key: "limit", Value: int32(1)}})
	}
	return mongoerr.New(mongoerr.BadValue, "the oplog entry's 'op' %q is not one of i, u, d, c, n", kind)
}

// update applies a 'u' entry: a $v: 2 diff (mongod's form since 5.0,
// and this server's local.oplog.rs), update operators, or a whole
// replacement document.
func (ap *applier) update(ns store.Namespace, o, o2 bson.Raw) error {
	first, err := o.IndexErr(0)
	if err != nil {
		return mongoerr.New(mongoerr.FailedToParse, "an update entry's 'o' is empty")
	}
	if first.Key() != "$v" || o.Lookup("diff").Type != bson.TypeEmbeddedDocument {
		// Update operators or a replacement, as the update command takes them.
		return ap.write(ns, "update", "updates", bson.D{{Key: "q", Value: o2}, {Key: "u", Value: o}, {Key: "upsert", Value: ap.alwaysUpsert}})
	}
	if v, _ := o.Lookup("$v").AsInt64OK(); v != 2 {
		return mongoerr.New(mongoerr.FailedToParse, "unsupported update entry version $v: %s", o.Lookup("$v"))
	}
	docs, err := ap.s.data(ap.ctx).Find(ns, store.FindSpec{Filter: mustMarshal(o2), Limit: 1})
	if err != nil {
		return err
	}
	var doc bson.D
	switch {
	case len(docs) == 1:
		if err := bson.Unmarshal(docs[0], &doc); err != nil {
			return fmt.Errorf("decode document to update: %w", err)
		}
	case !ap.alwaysUpsert:
		return nil
	default:
		if err := bson.Unmarshal(o2, &doc); err != nil {
			return fmt.Errorf("decode o2: %w", err)
		}
	}
	doc, err = applyDocDiff(doc, o.Lookup("diff").Document())
	if err != nil {
		return err
	}
	return ap.write(ns, "update", "updates", bson.D{{Key: "q", Value: o2}, {Key: "u", Value: doc}, {Key: "upsert", Value: true}})
}

// write runs one statement of a write command on ns and turns a write
// error into the command's error.
func (ap *applier) write(ns store.Namespace, cmd, field string, stmt bson.D) error {
	body := bson.D{{Key: cmd, Value: ns.Coll}, {Key: field, Value: bson.A{stmt}}}
	if ap.bypass {
		body = append(body, bson.E{Key: "bypassDocumentValidation", Value: true})
	}
	reply, err := ap.run(ns.DB, body)
	if err != nil {
		return err
	}
	if we, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := we.Values()
		if len(vals) > 0 {
			d := vals[0].Document()
			code, _ := d.Lookup("code").AsInt64OK()
			return mongoerr.New(int32(code), "%s", d.Lookup("errmsg").StringValue())
		}
	}
	return nil
}

// command applies a 'c' entry by running the command it records.
func (ap *applier) command(db string, o bson.Raw, ui *bson.Binary) error {
	first, err := o.IndexErr(0)
	if err != nil {
		return mongoerr.New(mongoerr.FailedToParse, "a command entry's 'o' is empty")
	}
	name := first.Key()
	body := bson.D{}
	elems, _ := o.Elements()
	for _, e := range elems {
		body = append(body, bson.E{Key: e.Key(), Value: e.Value()})
	}
	switch name {
	case "create":
		if ui != nil {
			return ap.createWithUUID(db, o, *ui)
		}
	case "drop", "collMod", "dropIndexes", "dropDatabase":
	case "renameCollection":
		db = "admin"
	case "createIndexes":
		// mongod's entry holds one flattened index spec; this server's
		// older form held an indexes array. Both are accepted.
		if _, err := o.LookupErr("indexes"); err != nil {
			body = bson.D{{Key: "createIndexes", Value: first.Value()}, {Key: "indexes", Value: bson.A{body[1:]}}}
		}
	case "commitIndexBuild":
		body = bson.D{{Key: "createIndexes", Value: first.Value()}, {Key: "indexes", Value: o.Lookup("indexes")}}
	case "startIndexBuild", "abortIndexBuild":
		return nil // commitIndexBuild builds the index
	case "applyOps":
		arr, ok := first.Value().ArrayOK()
		if !ok {
			return typeMismatch("applyOps", "applyOps", first.Value(), "array")
		}
		ops, _ := arr.Values()
		for i, v := range ops {
			d, ok := v.DocumentOK()
			if !ok {
				return mongoerr.New(mongoerr.FailedToParse, "nested applyOps: entry %d is not an object", i)
			}
			if err := ap.apply(d); err != nil {
				return err
			}
		}
		return nil
	default:
		return mongoerr.New(mongoerr.CommandNotSupported, "applyOps: the command entry %q is not supported by this server", name)
	}
	_, err = ap.run(db, body)
	if e, ok := mongoerr.As(err); ok && acceptableErrors[name] == e.Code {
		return nil // already applied: a replay overlaps what it replays onto
	}
	return err
}

// acceptableErrors are the failures of a command entry that mean it is
// already applied, as mongod's oplog application lists them: replaying
// an oplog that starts before the dumped data ends meets them.
var acceptableErrors = map[string]int32{
	"create":           mongoerr.NamespaceExists,
	"drop":             mongoerr.NamespaceNotFound,
	"collMod":          mongoerr.NamespaceNotFound,
	"renameCollection": mongoerr.NamespaceNotFound,
	"dropIndexes":      mongoerr.IndexNotFound,
}

// createWithUUID applies a create entry that names the collection's UUID
// (mongorestore --preserveUUID).
func (ap *applier) createWithUUID(db string, o bson.Raw, ui bson.Binary) error {
	if at, taken := ap.nsByUUID(ui); taken {
		if coll, _ := o.Index(0).Value().StringValueOK(); at.DB == db && at.Coll == coll {
			return nil // already applied
		}
		return mongoerr.New(mongoerr.NamespaceExists, "a collection with UUID %s already exists", uuidString(ui))
	}
	body := bson.D{}
	elems, _ := o.Elements()
	for _, e := range elems {
		body = append(body, bson.E{Key: e.Key(), Value: e.Value()})
	}
	raw, err := bson.Marshal(append(body, bson.E{Key: "$db", Value: db}))
	if err != nil {
		return fmt.Errorf("encode create: %w", err)
	}
	r := &request{name: "create", db: db, cmd: raw}
	if err := ap.s.authorize(ap.c, r); err != nil {
		return err
	}
	if fs, ok := commandFields["create"]; ok {
		if err := fs.check("create", raw, true); err != nil {
			return err
		}
	}
	for _, refuse := range []func(*request) error{refuseUsersDDL, refuseSystemWrite, refuseOplogWrite} {
		if err := refuse(r); err != nil {
			return err
		}
	}
	if err := checkCollation(raw); err != nil {
		return err
	}
	ns, err := collNS(r)
	if err != nil {
		return err
	}
	options, err := createOptions(ns, r)
	if err != nil {
		return err
	}
	return ap.s.data(ap.ctx).CreateWithUUID(ns, options, ui)
}

// run runs body against db as its own command, on the caller's
// connection and with its privileges, and returns the reply or its error.
func (ap *applier) run(db string, body bson.D) (bson.Raw, error) {
	body = append(body, bson.E{Key: "$db", Value: db})
	raw, err := bson.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	name := canonicalCommand(body[0].Key)
	if name == "applyOps" {
		return nil, mongoerr.New(mongoerr.BadValue, "applyOps may not run itself")
	}
	out, err := ap.s.runCommand(ap.ctx, ap.c, &request{name: name, db: db, cmd: raw})
	if err != nil {
		return nil, err
	}
	reply := bson.Raw(out)
	if ok, _ := reply.Lookup("ok").AsFloat64OK(); ok != 1 {
		code, _ := reply.Lookup("code").AsInt64OK()
		return nil, mongoerr.New(int32(code), "%s", reply.Lookup("errmsg").StringValue())
	}
	return reply, nil
}

// nsByUUID finds the collection with this UUID.
func (ap *applier) nsByUUID(ui bson.Binary) (store.Namespace, bool) {
	for _, d := range ap.s.data(ap.ctx).ListDatabases() {
		for _, c := range ap.s.data(ap.ctx).ListCollections(d.Name) {
			if !c.View && bytes.Equal(c.UUID.Data, ui.Data) {
				return store.Namespace{DB: d.Name, Coll: c.Name}, true
			}
		}
	}
	return store.Namespace{}, false
}

func uuidString(b bson.Binary) string {
	h := fmt.Sprintf("%x", b.Data)
	if len(h) != 32 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func mustMarshal(v any) bson.Raw {
	b, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// applyDocDiff applies a $v: 2 document diff to doc: d (remove), u
// (set), i (insert), and s<field> (a sub-diff of a document or array).
func applyDocDiff(doc bson.D, diff bson.Raw) (bson.D, error) {
	elems, err := diff.Elements()
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "bad diff: %v", err)
	}
	for _, e := range elems {
		k := e.Key()
		switch {
		case k == "d":
			fields, _ := e.Value().Document().Elements()
			for _, f := range fields {
				doc = removeField(doc, f.Key())
			}
		case k == "u" || k == "i":
			fields, ok := e.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "bad diff: '%s' is not an object", k)
			}
			fs, _ := fields.Elements()
			for _, f := range fs {
				doc = setField(doc, f.Key(), f.Value())
			}
		case strings.HasPrefix(k, "s") && len(k) > 1:
			sub, ok := e.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "bad diff: '%s' is not an object", k)
			}
			field := k[1:]
			cur, _ := getField(doc, field)
			next, err := applySubDiff(cur, sub)
			if err != nil {
				return nil, err
			}
			doc = setField(doc, field, next)
		default:
			return nil, mongoerr.New(mongoerr.FailedToParse, "bad diff: unknown section '%s'", k)
		}
	}
	return doc, nil
}

// applySubDiff applies a sub-diff to a nested value: an array diff
// (a: true, l: new length, u<i>, s<i>) or a document diff.
func applySubDiff(cur any, sub bson.Raw) (any, error) {
	if a, ok := sub.Lookup("a").BooleanOK(); !ok || !a {
		d, _ := cur.(bson.D)
		return applyDocDiff(d, sub)
	}
	arr, _ := cur.(bson.A)
	elems, _ := sub.Elements()
	for _, e := range elems {
		k := e.Key()
		switch {
		case k == "a":
		case k == "l":
			n, ok := e.Value().AsInt64OK()
			if !ok || n < 0 {
				return nil, mongoerr.New(mongoerr.FailedToParse, "bad array diff: 'l' is %s", e.Value())
			}
			arr = resize(arr, int(n))
		case len(k) > 1 && (k[0] == 'u' || k[0] == 's'):
			i, err := strconv.Atoi(k[1:])
			if err != nil || i < 0 {
				return nil, mongoerr.New(mongoerr.FailedToParse, "bad array diff: unknown section '%s'", k)
			}
			if i >= len(arr) {
				arr = resize(arr, i+1)
			}
			if k[0] == 'u' {
				arr[i] = e.Value()
				continue
			}
			d, ok := e.Value().DocumentOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.FailedToParse, "bad array diff: '%s' is not an object", k)
			}
			next, err := applySubDiff(arr[i], d)
			if err != nil {
				return nil, err
			}
			arr[i] = next
		default:
			return nil, mongoerr.New(mongoerr.FailedToParse, "bad array diff: unknown section '%s'", k)
		}
	}
	return arr, nil
}

func resize(arr bson.A, n int) bson.A {
	for len(arr) < n {
		arr = append(arr, nil)
	}
	return arr[:n]
}

func getField(doc bson.D, k string) (any, bool) {
	for _, e := range doc {
		if e.Key == k {
			return e.Value, true
		}
	}
	return nil, false
}

func setField(doc bson.D, k string, v any) bson.D {
	for i := range doc {
		if doc[i].Key == k {
			doc[i].Value = v
			return doc
		}
	}
	return append(doc, bson.E{Key: k, Value: v})
}

func removeField(doc bson.D, k string) bson.D {
	for i := range doc {
		if doc[i].Key == k {
			return append(doc[:i], doc[i+1:]...)
		}
	}
	return doc
}

// userEntry applies an entry on admin.system.users (a createUser,
// updateUser or dropUser on the replayed server) through the user store,
// so that the users in memory follow. Only root and restore may.
func (ap *applier) userEntry(kind string, o, op bson.Raw) error {
	if ap.s.cfg.Auth {
		if p := ap.s.privilegesOf(ap.c); p == nil || !(p.all || p.restore) {
			return mongoerr.New(mongoerr.Unauthorized, "not authorized to apply an entry on %s", usersNS)
		}
	}
	var doc bson.Raw
	switch kind {
	case "i":
		doc = o
	case "u":
		o2, ok := op.Lookup("o2").DocumentOK()
		id, ok2 := o2.Lookup("_id").StringValueOK()
		if !ok || !ok2 {
			return mongoerr.New(mongoerr.FailedToParse, "an update entry on %s has no o2 {_id}", usersNS)
		}
		doc = o
		if first, err := o.IndexErr(0); err == nil && first.Key() == "$v" {
			db, user, _ := strings.Cut(id, ".")
			cur := ap.s.lookupUser(db, user)
			if cur == nil {
				return mongoerr.New(mongoerr.UserNotFound, "Could not find user %q to update", id)
			}
			var d bson.D
			if err := bson.Unmarshal(mustMarshal(cur.document(true)), &d); err != nil {
				return err
			}
			next, err := applyDocDiff(d, o.Lookup("diff").Document())
			if err != nil {
				return err
			}
			doc = mustMarshal(next)
		}
	case "d":
		id, ok := o.Lookup("_id").StringValueOK()
		if !ok {
			return mongoerr.New(mongoerr.FailedToParse, "a delete entry on %s has no _id", usersNS)
		}
		_, err := ap.s.dropUsers(func(u *authUser) bool { return u.ID == id })
		return err
	default:
		return mongoerr.New(mongoerr.BadValue, "the oplog entry's 'op' %q is not one of i, u, d, c, n", kind)
	}
	u, err := parseUser(doc)
	if err != nil {
		return mongoerr.New(mongoerr.BadValue, "%s: %v", usersNS, err)
	}
	if u.ID != u.DB+"."+u.User || u.User == "" {
		return mongoerr.New(mongoerr.BadValue, "%s: user document %s has an _id that is not db.user", usersNS, doc)
	}
	return ap.s.putUser(u, ap.s.lookupUser(u.DB, u.User) == nil)
}
