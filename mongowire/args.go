package mongowire

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// typeNames are MongoDB's names of BSON types, as its error messages use them.
var typeNames = map[bson.Type]string{
	bson.TypeDouble: "double", bson.TypeString: "string", bson.TypeEmbeddedDocument: "object",
	bson.TypeArray: "array", bson.TypeBinary: "binData", bson.TypeUndefined: "undefined",
	bson.TypeObjectID: "objectId", bson.TypeBoolean: "bool", bson.TypeDateTime: "date",
	bson.TypeNull: "null", bson.TypeRegex: "regex", bson.TypeDBPointer: "dbPointer",
	bson.TypeJavaScript: "javascript", bson.TypeSymbol: "symbol", bson.TypeCodeWithScope: "javascriptWithScope",
	bson.TypeInt32: "int", bson.TypeTimestamp: "timestamp", bson.TypeInt64: "long",
	bson.TypeDecimal128: "decimal", bson.TypeMinKey: "minKey", bson.TypeMaxKey: "maxKey",
}

func typeName(t bson.Type) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "missing"
}

func typeMismatch(cmd, field string, v bson.RawValue, want string) *mongoerr.Error {
	return mongoerr.New(mongoerr.TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
		cmd, field, typeName(v.Type), want)
}

// truthy is MongoDB's boolean coercion of an option value.
func truthy(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeBoolean:
		return v.Boolean()
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		f, _ := v.AsFloat64OK()
		return f != 0
	case bson.TypeDecimal128:
		return !v.Decimal128().IsZero()
	case bson.TypeNull, bson.TypeUndefined, 0:
		return false
	default:
		return true
	}
}

// args reads the fields of one command, reporting wrong types as MongoDB's
// IDL does. The first failure sticks; check err once at the end.
type args struct {
	name string
	cmd  bson.Raw
	err  error
}

func newArgs(r *request) *args { return &args{name: r.name, cmd: r.cmd} }

func (a *args) lookup(field string) (bson.RawValue, bool) {
	v, err := a.cmd.LookupErr(field)
	if err != nil || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined {
		return bson.RawValue{}, false
	}
	return v, true
}

func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *args) bool(field string) bool {
	v, ok := a.lookup(field)
	if !ok {
		return false
	}
	switch v.Type {
	case bson.TypeBoolean, bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return truthy(v)
	}
	a.fail(typeMismatch(a.name, field, v, "bool"))
	return false
}

// int64 reads a whole number; doubles must be integral.
func (a *args) int64(field string) (int64, bool) {
	v, ok := a.lookup(field)
	if !ok {
		return 0, false
	}
	n, err := asInt64(a.name, field, v)
	if err != nil {
		a.fail(err)
		return 0, false
	}
	return n, true
}

func asInt64(cmd, field string, v bson.RawValue) (int64, error) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), nil
	case bson.TypeInt64:
		return v.Int64(), nil
	case bson.TypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<62 {
			return 0, mongoerr.New(mongoerr.BadValue, "BSON field '%s.%s' must be a whole number, got %v", cmd, field, f)
		}
		return int64(f), nil
	case bson.TypeDecimal128:
		if f, ok := v.AsFloat64OK(); ok && f == math.Trunc(f) {
			return int64(f), nil
		}
		return 0, mongoerr.New(mongoerr.BadValue, "BSON field '%s.%s' must be a whole number", cmd, field)
	}
	return 0, typeMismatch(cmd, field, v, "long")
}

func (a *args) string(field string) (string, bool) {
	v, ok := a.lookup(field)
	if !ok {
		return "", false
	}
	s, ok := v.StringValueOK()
	if !ok {
		a.fail(typeMismatch(a.name, field, v, "string"))
	}
	return s, ok
}

func (a *args) doc(field string) bson.Raw {
	v, ok := a.lookup(field)
	if !ok {
		return nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		a.fail(typeMismatch(a.name, field, v, "object"))
	}
	return d
}

// docs reads an array of documents.
func (a *args) docs(field string) []bson.Raw {
	v, ok := a.lookup(field)
	if !ok {
		return nil
	}
	arr, ok := v.ArrayOK()
	if !ok {
		a.fail(typeMismatch(a.name, field, v, "array"))
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		a.fail(mongoerr.New(mongoerr.InvalidBSON, "BSON field '%s.%s': %v", a.name, field, err))
		return nil
	}
	out := make([]bson.Raw, 0, len(vals))
	for i, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			a.fail(typeMismatch(a.name, field+"."+itoa(i), e, "object"))
			return nil
		}
		out = append(out, d)
	}
	return out
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// validDB checks a database name as MongoDB does.
func validDB(db string) error {
	if db == "" || len(db) >= 64 || strings.ContainsAny(db, "/\\. \"$\x00") {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: '%s'", db)
	}
	return nil
}

// collNS reads the collection named by the command's first field.
func collNS(r *request) (store.Namespace, error) {
	if err := validDB(r.db); err != nil {
		return store.Namespace{}, err
	}
	v := r.cmd.Index(0).Value()
	coll, ok := v.StringValueOK()
	if !ok {
		return store.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "collection name has invalid type %s", typeName(v.Type))
	}
	if coll == "" || strings.ContainsRune(coll, 0) || strings.HasPrefix(coll, ".") || strings.HasSuffix(coll, ".") {
		return store.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.%s'", r.db, coll)
	}
	if strings.Contains(coll, "$") && !strings.HasPrefix(coll, "$cmd") {
		return store.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "Invalid collection name: %s", coll)
	}
	return store.Namespace{DB: r.db, Coll: coll}, nil
}

// parseNS splits "db.coll" as renameCollection takes it.
func parseNS(cmd, field, s string) (store.Namespace, error) {
	db, coll, ok := strings.Cut(s, ".")
	if !ok || coll == "" || validDB(db) != nil {
		return store.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "Invalid %s namespace for %s: '%s'", field, cmd, s)
	}
	return store.Namespace{DB: db, Coll: coll}, nil
}

// fieldsExcept returns the command's fields other than the named ones and
// the generic fields every command may carry.
func fieldsExcept(cmd bson.Raw, skip ...string) bson.D {
	var out bson.D
	elems, _ := cmd.Elements()
	for i, e := range elems {
		k := e.Key()
		if i == 0 || isGenericField(k) || contains(skip, k) {
			continue
		}
		out = append(out, bson.E{Key: k, Value: e.Value()})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var genericFields = map[string]bool{
	"$db": true, "$readPreference": true, "$clusterTime": true, "lsid": true, "txnNumber": true,
	"autocommit": true, "startTransaction": true, "readConcern": true, "writeConcern": true,
	"maxTimeMS": true, "comment": true, "apiVersion": true, "apiStrict": true, "apiDeprecationErrors": true,
	"$audit": true, "$client": true, "$configServerState": true, "mayBypassWriteBlocking": true,
}

func isGenericField(k string) bool { return genericFields[k] }
