package store

import (
	"strings"

	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// Document validation, as mongod's: a collection's validator (query
// operators and $jsonSchema) is checked on insert and update unless the
// write bypasses it; validationLevel "moderate" skips updates of documents
// that already failed it, "off" skips everything; validationAction "warn"
// logs instead of failing. A failure is code 121 with errInfo
// {failingDocumentId, details}.

// validator is a collection's compiled validator and its settings.
type validator struct {
	filter  *mql.Filter
	clauses []vclause
	level   string // "strict", "moderate" or "off"
	warn    bool
}

// vclause is one top-level vclause of a validator, with what explains its
// failure.
type vclause struct {
	filter  *mql.Filter
	explain func(doc bson.Raw) bson.D
}

// rawOption returns an option value as a raw value, whatever Go type it
// was decoded to.
func rawOption(v any) (bson.RawValue, bool) {
	if rv, ok := v.(bson.RawValue); ok {
		return rv, true
	}
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		return bson.RawValue{}, false
	}
	return bson.Raw(b).Lookup("v"), true
}

// checkValidatorOptions checks validator, validationLevel and
// validationAction as create and collMod give them.
func checkValidatorOptions(options bson.D) error {
	for _, o := range options {
		switch o.Key {
		case "validator":
			v, _ := rawOption(o.Value)
			if v.Type != bson.TypeEmbeddedDocument {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'validator' is the wrong type '%s', expected type 'object'", v.Type)
			}
			if _, err := compileClauses(v.Document()); err != nil {
				return err
			}
		case "validationLevel":
			v, _ := rawOption(o.Value)
			s, ok := v.StringValueOK()
			if !ok || (s != "off" && s != "strict" && s != "moderate") {
				return mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field 'validationLevel' is not a valid value.", optString(v))
			}
		case "validationAction":
			v, _ := rawOption(o.Value)
			s, ok := v.StringValueOK()
			if !ok || (s != "error" && s != "warn") {
				return mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field 'validationAction' is not a valid value.", optString(v))
			}
		}
	}
	return nil
}

func optString(v bson.RawValue) string {
	if s, ok := v.StringValueOK(); ok {
		return s
	}
	return v.String()
}

// newValidator compiles the validator of a collection's options; nil when
// it has none (or an empty one). Options were checked when given, so a
// failure here (an option journaled by an older version) leaves the
// collection without a validator.
func newValidator(options bson.D) *validator {
	v := &validator{level: "strict"}
	var spec bson.Raw
	for _, o := range options {
		rv, _ := rawOption(o.Value)
		switch o.Key {
		case "validator":
			if rv.Type == bson.TypeEmbeddedDocument {
				spec = rv.Document()
			}
		case "validationLevel":
			if s, ok := rv.StringValueOK(); ok {
				v.level = s
			}
		case "validationAction":
			v.warn = rv.StringValue() == "warn"
		}
	}
	if len(spec) <= 5 || v.level == "off" {
		return nil
	}
	f, err := mql.CompileFilter(spec)
	if err != nil {
		return nil
	}
	cl, err := compileClauses(spec)
	if err != nil {
		return nil
	}
	v.filter, v.clauses = f, cl
	return v
}

// notAllowedInValidator are the query operators mongod refuses in a
// validator (QueryFeatureNotAllowed).
var notAllowedInValidator = []string{"$near", "$nearSphere", "$text", "$where"}

func compileClauses(spec bson.Raw) ([]vclause, error) {
	for _, op := range notAllowedInValidator {
		if bytes.Contains(spec, append([]byte(op), 0)) {
			return nil, mongoerr.New(mongoerr.QueryFeatureNotAllowed, "%s is not allowed in this context", op)
		}
	}
	if _, err := mql.CompileFilter(spec); err != nil {
		return nil, err
	}
	elems, err := spec.Elements()
	if err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid validator: %v", err)
	}
	out := make([]vclause, 0, len(elems))
	for _, e := range elems {
		cl, err := compileClause(e)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

func compileClause(e bson.RawElement) (vclause, error) {
	one := buildDoc(e)
	f, err := mql.CompileFilter(one)
	if err != nil {
		return vclause{}, err
	}
	key, v := e.Key(), e.Value()
	cl := vclause{filter: f}
	switch {
	case key == "$jsonSchema":
		s, err := mql.CompileSchema(v.Document())
		if err != nil {
			return vclause{}, err
		}
		cl.explain = s.Explain
	case key == "$and" || key == "$or" || key == "$nor":
		var subs [][]vclause
		for _, sv := range arrayOf(v) {
			sc, err := compileClauses(sv.Document())
			if err != nil {
				return vclause{}, err
			}
			subs = append(subs, sc)
		}
		cl.explain = func(doc bson.Raw) bson.D {
			var bad bson.A
			for i, sc := range subs {
				matched := allMatch(sc, doc)
				if key == "$nor" && matched {
					bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: bson.D{
						{Key: "operatorName", Value: "$nor"}, {Key: "reason", Value: "child expression matched"}}}})
				}
				if key != "$nor" && !matched {
					bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: explainClauses(sc, doc)}})
				}
			}
			return bson.D{{Key: "operatorName", Value: key}, {Key: "clausesNotSatisfied", Value: bad}}
		}
	case key == "$expr":
		cl.explain = func(bson.Raw) bson.D {
			return bson.D{{Key: "operatorName", Value: "$expr"}, {Key: "specifiedAs", Value: one},
				{Key: "reason", Value: "expression did not match"}, {Key: "expressionResult", Value: false}}
		}
	case v.Type == bson.TypeEmbeddedDocument && isOperatorDoc(v.Document()):
		var ops []vclause
		for _, oe := range mustElems(v.Document()) {
			sub := buildDoc(appendElem(key, bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: buildDoc(oe)}))
			sf, err := mql.CompileFilter(sub)
			if err != nil {
				// $regex with $options and the like only compile together.
				ops = nil
				break
			}
			ops = append(ops, vclause{filter: sf, explain: fieldExplain(key, oe.Key(), sub)})
		}
		if len(ops) <= 1 {
			op := "$and"
			if first, err := v.Document().IndexErr(0); err == nil {
				op = first.Key()
			}
			cl.explain = fieldExplain(key, op, one)
			break
		}
		cl.explain = func(doc bson.Raw) bson.D { return explainClauses(ops, doc) }
	default:
		cl.explain = fieldExplain(key, "$eq", one)
	}
	return cl, nil
}

func arrayOf(v bson.RawValue) []bson.RawValue {
	vals, _ := v.Array().Values()
	return vals
}

func mustElems(d bson.Raw) []bson.RawElement {
	es, _ := d.Elements()
	return es
}

func isOperatorDoc(d bson.Raw) bool {
	first, err := d.IndexErr(0)
	return err == nil && len(first.Key()) > 0 && first.Key()[0] == '$'
}

func appendElem(key string, v bson.RawValue) []byte {
	b := []byte{byte(v.Type)}
	b = append(b, key...)
	b = append(b, 0)
	return append(b, v.Value...)
}

func allMatch(cs []vclause, doc bson.Raw) bool {
	for _, c := range cs {
		if !c.filter.Match(doc) {
			return false
		}
	}
	return true
}

// explainClauses describes the failing clauses of an implicit $and: the
// vclause itself when it is the only one.
func explainClauses(cs []vclause, doc bson.Raw) bson.D {
	var bad bson.A
	var last bson.D
	for i, c := range cs {
		if c.filter.Match(doc) {
			continue
		}
		last = c.explain(doc)
		bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: last}})
	}
	if len(cs) == 1 {
		return last
	}
	return bson.D{{Key: "operatorName", Value: "$and"}, {Key: "clausesNotSatisfied", Value: bad}}
}

// fieldReasons are mongod's reasons for a failed field operator.
var fieldReasons = map[string]string{
	"$eq": "comparison failed", "$ne": "comparison failed", "$gt": "comparison failed", "$gte": "comparison failed",
	"$lt": "comparison failed", "$lte": "comparison failed", "$in": "no matching value found in array",
	"$nin": "matching value found in array", "$type": "type did not match", "$regex": "regular expression did not match",
	"$exists": "path does not exist", "$size": "array length was not equal to given size",
	"$all": "array did not contain all specified values", "$elemMatch": "At least one element did not match the sub-query",
	"$mod": "$mod did not evaluate to expected remainder", "$not": "child expression matched",
}

func fieldExplain(path, op string, specifiedAs bson.Raw) func(doc bson.Raw) bson.D {
	return func(doc bson.Raw) bson.D {
		d := bson.D{{Key: "operatorName", Value: op}, {Key: "specifiedAs", Value: specifiedAs}}
		v, err := doc.LookupErr(strings.Split(path, ".")...)
		switch {
		case err != nil && op == "$exists":
			d = append(d, bson.E{Key: "reason", Value: "path does not exist"})
		case err != nil:
			d = append(d, bson.E{Key: "reason", Value: "field was missing"})
		case op == "$exists":
			d = append(d, bson.E{Key: "reason", Value: "path had value"}, bson.E{Key: "consideredValue", Value: v})
		default:
			reason := fieldReasons[op]
			if reason == "" {
				reason = "expression did not match"
			}
			d = append(d, bson.E{Key: "reason", Value: reason}, bson.E{Key: "consideredValue", Value: v})
			if op == "$type" {
				d = append(d, bson.E{Key: "consideredType", Value: typeAlias(v.Type)})
			}
		}
		return d
	}
}

func typeAlias(t bson.Type) string {
	names := map[bson.Type]string{
		bson.TypeDouble: "double", bson.TypeString: "string", bson.TypeEmbeddedDocument: "object", bson.TypeArray: "array",
		bson.TypeBinary: "binData", bson.TypeObjectID: "objectId", bson.TypeBoolean: "bool", bson.TypeDateTime: "date",
		bson.TypeNull: "null", bson.TypeRegex: "regex", bson.TypeInt32: "int", bson.TypeTimestamp: "timestamp",
		bson.TypeInt64: "long", bson.TypeDecimal128: "decimal", bson.TypeMinKey: "minKey", bson.TypeMaxKey: "maxKey",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return "unknown"
}

// validate checks doc, the new version of old (nil for an insert),
// against c's validator. It returns a 121 error, or nil when the document
// passes, the write bypasses validation, or the action is warn (then the
// failure is logged).
func (s *Store) validate(ns Namespace, c *collection, doc, old bson.Raw, bypass bool) *mongoerr.Error {
	v := c.validator
	if v == nil || bypass || v.filter.Match(doc) {
		return nil
	}
	if old != nil && v.level == "moderate" && !v.filter.Match(old) {
		return nil
	}
	details := explainClauses(v.clauses, doc)
	info := bson.D{{Key: "failingDocumentId", Value: idOf(doc)}, {Key: "details", Value: details}}
	if v.warn {
		s.log.Warn("Document would fail validation", "namespace", ns.String(), "document", idOf(doc).String(), "errInfo", bson.Raw(mustMarshal(info)).String())
		return nil
	}
	e := mongoerr.New(mongoerr.DocumentValidationFailure, "Document failed validation")
	e.Info = bson.D{{Key: "errInfo", Value: info}}
	return e
}

func mustMarshal(d bson.D) []byte {
	b, _ := bson.Marshal(d)
	return b
}
