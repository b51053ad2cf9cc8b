package mongowire

import (
	"context"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdCreate: {create: "c", ...options} -> {}. The options other than the
// generic command fields go to the store as given, but for idIndex.
func (s *Server) cmdCreate(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	options, err := createOptions(ns, r)
	if err != nil {
		return nil, err
	}
	if err := s.data(ctx).Create(ns, options); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// createOptions returns create's collection options. idIndex (which
// mongorestore always sends) is checked as mongod checks it and, as on
// mongod, not kept among the options: it only describes the _id index,
// and here that index is always {_id: 1} named _id_ with the simple
// collation.
func createOptions(ns store.Namespace, r *request) (bson.D, error) {
	all := fieldsExcept(r.cmd)
	options := make(bson.D, 0, len(all))
	for _, o := range all {
		if o.Key != "idIndex" {
			options = append(options, o)
			continue
		}
		if err := checkIDIndex(ns, r, o.Value.(bson.RawValue)); err != nil {
			return nil, err
		}
	}
	return options, nil
}

func checkIDIndex(ns store.Namespace, r *request, v bson.RawValue) error {
	spec, ok := v.DocumentOK()
	if !ok {
		return typeMismatch("create", "idIndex", v, "object")
	}
	for _, f := range []string{"viewOn", "clusteredIndex"} {
		if _, err := r.cmd.LookupErr(f); err == nil {
			return mongoerr.New(mongoerr.InvalidOptions, "'idIndex' is not allowed with '%s'", f)
		}
	}
	elems, _ := spec.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "key", "name", "ns", "v", "collation":
		default:
			return mongoerr.New(mongoerr.InvalidIndexSpecOption, "The field '%s' is not valid for an _id index specification. Specification: %s", e.Key(), spec)
		}
	}
	key, err := spec.LookupErr("key")
	if err != nil {
		return mongoerr.New(mongoerr.FailedToParse, "The 'key' field is a required property of an index specification")
	}
	kd, ok := key.DocumentOK()
	kelems, _ := kd.Elements()
	if !ok || len(kelems) != 1 || kelems[0].Key() != "_id" || !isNumberOne(kelems[0].Value()) {
		return mongoerr.New(mongoerr.BadValue, "The field 'key' for an _id index must be {_id: 1}, but got %s", key)
	}
	name, err := spec.LookupErr("name")
	if err != nil {
		return mongoerr.New(mongoerr.FailedToParse, "The 'name' field is a required property of an index specification")
	}
	if n, ok := name.StringValueOK(); !ok || n != "_id_" {
		return mongoerr.New(mongoerr.BadValue, "The field 'name' for an _id index must be '_id_', but got %s", name)
	}
	if nsv, err := spec.LookupErr("ns"); err == nil {
		if n, ok := nsv.StringValueOK(); !ok || n != ns.String() {
			return mongoerr.New(mongoerr.BadValue, "The value of the field 'ns' (%s) doesn't match the namespace '%s'", nsv, ns)
		}
	}
	if vv, err := spec.LookupErr("v"); err == nil {
		if n, ok := vv.AsInt64OK(); !ok || (n != 1 && n != 2) {
			return mongoerr.New(mongoerr.CannotCreateIndex, "Invalid index specification %s; cannot create an index with v=%s", spec, numberString(vv))
		}
	}
	// The _id index has the collection's collation, and says so.
	want, err := mql.ParseCollation(collationArg(r.cmd))
	if collationArg(r.cmd).Type == 0 {
		want, err = nil, nil
	}
	if err != nil {
		return err
	}
	got, err := mql.ParseCollation(collationArg(spec))
	if collationArg(spec).Type == 0 {
		got, err = nil, nil
	}
	if err != nil {
		return err
	}
	if !got.SameAs(want) {
		return mongoerr.New(mongoerr.BadValue, "'idIndex' must have the same collation as the collection.")
	}
	return nil
}

func isNumberOne(v bson.RawValue) bool {
	f, ok := v.AsFloat64OK()
	return ok && f == 1
}

// numberString shows a number as mongod's messages do (3, not {"$numberInt": "3"}).
func numberString(v bson.RawValue) string {
	if n, ok := v.AsInt64OK(); ok {
		return strconv.FormatInt(n, 10)
	}
	return v.String()
}
