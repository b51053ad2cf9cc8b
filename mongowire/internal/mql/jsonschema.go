package mql

import (
	"math"
	"regexp"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// $jsonSchema: MongoDB's dialect of JSON Schema draft 4 (bsonType, no
// $ref, format or default), as a query operator and as a collection
// validator. A schema explains why a value fails in mongod's errInfo
// shape (schemaRulesNotSatisfied), so that code 121 carries it.

// Schema is a compiled $jsonSchema. It is safe for concurrent use.
type Schema struct {
	spec  bson.Raw
	rules []schemaRule
}

// schemaRule is one keyword of a schema. check returns the detail of a
// failure of v, or nil if v satisfies it.
type schemaRule struct {
	name string
	arg  bson.RawValue
	// check is given the value (Type 0 when missing, which only the
	// top-level and "required" ever see).
	check func(v bson.RawValue) bson.D
}

// unsupportedKeywords are JSON Schema keywords mongod refuses.
var unsupportedKeywords = map[string]bool{"$ref": true, "$schema": true, "default": true, "definitions": true, "format": true, "id": true}

// CompileSchema compiles a $jsonSchema document.
func CompileSchema(spec bson.Raw) (*Schema, error) { return compileSchema(spec, 0) }

func schemaErr(code int32, format string, args ...any) error {
	return mongoerr.New(code, format, args...)
}

func compileSchema(spec bson.Raw, depth int) (*Schema, error) {
	if depth > maxFilterDepth {
		return nil, schemaErr(mongoerr.BadValue, "$jsonSchema exceeded maximum nesting depth")
	}
	s := &Schema{spec: spec}
	elems, err := spec.Elements()
	if err != nil {
		return nil, schemaErr(mongoerr.InvalidBSON, "invalid $jsonSchema: %v", err)
	}
	var haveType bool
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		switch {
		case unsupportedKeywords[key]:
			return nil, schemaErr(mongoerr.FailedToParse, "$jsonSchema keyword '%s' is not currently supported", key)
		case key == "title" || key == "description":
			if v.Type != bson.TypeString {
				return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a string", key)
			}
			continue
		case key == "type" || key == "bsonType":
			if haveType {
				return nil, schemaErr(mongoerr.FailedToParse, "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'")
			}
			haveType = true
		}
		r, err := compileKeyword(key, v, depth)
		if err != nil {
			return nil, err
		}
		r.name, r.arg = key, v
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func needNumber(key string, v bson.RawValue) error {
	if !isNumeric(v.Type) {
		return schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a number", key)
	}
	return nil
}

func needCount(key string, v bson.RawValue) (int64, error) {
	if err := needNumber(key, v); err != nil {
		return 0, err
	}
	f := asFloat(v)
	if f < 0 || f != math.Trunc(f) {
		return 0, schemaErr(mongoerr.FailedToParse, "$jsonSchema keyword '%s' must be a representable as a non-negative integer", key)
	}
	return int64(f), nil
}

func needSchema(key string, v bson.RawValue, depth int) (*Schema, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an object", key)
	}
	return compileSchema(v.Document(), depth+1)
}

func needSchemas(key string, v bson.RawValue, depth int) ([]*Schema, error) {
	if v.Type != bson.TypeArray {
		return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an array", key)
	}
	vals := arrayValues(v.Value)
	if len(vals) == 0 {
		return nil, schemaErr(mongoerr.BadValue, "$jsonSchema keyword '%s' must be a non-empty array", key)
	}
	out := make([]*Schema, len(vals))
	for i, sv := range vals {
		if sv.Type != bson.TypeEmbeddedDocument {
			return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be an array of objects, but found an element of type %s", key, typeName(sv.Type))
		}
		s, err := compileSchema(sv.Document(), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// jsonTypes are the JSON Schema type names mongod accepts.
var jsonTypes = map[string]func(bson.Type) bool{
	"object":  func(t bson.Type) bool { return t == bson.TypeEmbeddedDocument },
	"array":   func(t bson.Type) bool { return t == bson.TypeArray },
	"number":  isNumeric,
	"boolean": func(t bson.Type) bool { return t == bson.TypeBoolean },
	"string":  func(t bson.Type) bool { return t == bson.TypeString },
	"null":    func(t bson.Type) bool { return t == bson.TypeNull },
}

func compileTypeKeyword(key string, v bson.RawValue) (func(bson.Type) bool, error) {
	var names []bson.RawValue
	switch v.Type {
	case bson.TypeString:
		names = []bson.RawValue{v}
	case bson.TypeArray:
		names = arrayValues(v.Value)
		if len(names) == 0 {
			return nil, schemaErr(mongoerr.FailedToParse, "$jsonSchema keyword '%s' must name at least one type", key)
		}
	default:
		return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be either a string or an array of strings", key)
	}
	var preds []func(bson.Type) bool
	for _, n := range names {
		if n.Type != bson.TypeString {
			return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' array elements must be strings", key)
		}
		name := str(n)
		if key == "type" {
			p, ok := jsonTypes[name]
			if !ok {
				if name == "integer" {
					return nil, schemaErr(mongoerr.BadValue, "$jsonSchema type 'integer' is not currently supported.")
				}
				return nil, schemaErr(mongoerr.BadValue, "Unknown type name alias: %s", name)
			}
			preds = append(preds, p)
			continue
		}
		if name == "number" {
			preds = append(preds, isNumeric)
			continue
		}
		t, ok := typeNames[name]
		if !ok {
			return nil, schemaErr(mongoerr.BadValue, "Unknown type name alias: %s", name)
		}
		preds = append(preds, func(x bson.Type) bool { return x == t })
	}
	return func(t bson.Type) bool {
		for _, p := range preds {
			if p(t) {
				return true
			}
		}
		return false
	}, nil
}

// failed builds the detail of a failed keyword: operatorName, specifiedAs,
// reason, then extra fields.
func failed(key string, arg bson.RawValue, reason string, extra ...bson.E) bson.D {
	d := bson.D{{Key: "operatorName", Value: key}, {Key: "specifiedAs", Value: bson.D{{Key: key, Value: arg}}}}
	if reason != "" {
		d = append(d, bson.E{Key: "reason", Value: reason})
	}
	return append(d, extra...)
}

func compileKeyword(key string, v bson.RawValue, depth int) (schemaRule, error) {
	r := schemaRule{}
	switch key {
	case "type", "bsonType":
		ok, err := compileTypeKeyword(key, v)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type == 0 || ok(x.Type) {
				return nil
			}
			return failed(key, v, "type did not match", bson.E{Key: "consideredValue", Value: x}, bson.E{Key: "consideredType", Value: typeName(x.Type)})
		}
	case "minimum", "maximum":
		if err := needNumber(key, v); err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if !isNumeric(x.Type) {
				return nil
			}
			c := Compare(x, v)
			if (key == "minimum" && c >= 0) || (key == "maximum" && c <= 0) {
				return nil
			}
			return failed(key, v, "comparison failed", bson.E{Key: "consideredValue", Value: x})
		}
	case "exclusiveMinimum", "exclusiveMaximum":
		if v.Type != bson.TypeBoolean {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword '%s' must be a boolean", key)
		}
		r.check = func(bson.RawValue) bson.D { return nil } // applied with minimum/maximum, below
	case "multipleOf":
		if err := needNumber(key, v); err != nil {
			return r, err
		}
		if asFloat(v) <= 0 {
			return r, schemaErr(mongoerr.FailedToParse, "$jsonSchema keyword 'multipleOf' must have a positive value")
		}
		r.check = func(x bson.RawValue) bson.D {
			if !isNumeric(x.Type) {
				return nil
			}
			if m := math.Mod(asFloat(x), asFloat(v)); m == 0 {
				return nil
			}
			return failed(key, v, "considered value is not a multiple of the specified value", bson.E{Key: "consideredValue", Value: x})
		}
	case "minLength", "maxLength":
		n, err := needCount(key, v)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeString {
				return nil
			}
			l := int64(utf8.RuneCountInString(str(x)))
			if (key == "minLength" && l >= n) || (key == "maxLength" && l <= n) {
				return nil
			}
			return failed(key, v, "specified string length was not satisfied", bson.E{Key: "consideredValue", Value: x})
		}
	case "pattern":
		if v.Type != bson.TypeString {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'pattern' must be a string")
		}
		re, err := compileRegex(str(v), "", "")
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeString || re.MatchString(str(x)) {
				return nil
			}
			return failed(key, v, "regular expression did not match", bson.E{Key: "consideredValue", Value: x})
		}
	case "enum":
		if v.Type != bson.TypeArray {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'enum' must be an array")
		}
		vals := arrayValues(v.Value)
		if len(vals) == 0 {
			return r, schemaErr(mongoerr.FailedToParse, "$jsonSchema keyword 'enum' cannot be an empty array")
		}
		r.check = func(x bson.RawValue) bson.D {
			for _, e := range vals {
				if Equal(x, e) {
					return nil
				}
			}
			return failed(key, v, "value was not found in enum", bson.E{Key: "consideredValue", Value: x})
		}
	case "required":
		if v.Type != bson.TypeArray {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'required' must be an array")
		}
		vals := arrayValues(v.Value)
		if len(vals) == 0 {
			return r, schemaErr(mongoerr.BadValue, "$jsonSchema keyword 'required' cannot be an empty array")
		}
		names := make([]string, len(vals))
		for i, n := range vals {
			if n.Type != bson.TypeString {
				return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'required' must contain only strings")
			}
			names[i] = str(n)
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeEmbeddedDocument {
				return nil
			}
			var missing bson.A
			for _, n := range names {
				if lookup(x.Value, n).Type == 0 {
					missing = append(missing, n)
				}
			}
			if missing == nil {
				return nil
			}
			return failed(key, v, "", bson.E{Key: "missingProperties", Value: missing})
		}
	case "properties":
		if v.Type != bson.TypeEmbeddedDocument {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'properties' must be an object")
		}
		type prop struct {
			name string
			s    *Schema
		}
		var props []prop
		for _, e := range mustElements(v.Document()) {
			s, err := needSchema("properties", e.Value(), depth)
			if err != nil {
				return r, schemaErr(mongoerr.TypeMismatch, "Nested schema for $jsonSchema property '%s' must be an object", e.Key())
			}
			props = append(props, prop{e.Key(), s})
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeEmbeddedDocument {
				return nil
			}
			var bad bson.A
			for _, p := range props {
				fv := lookup(x.Value, p.name)
				if fv.Type == 0 {
					continue
				}
				if d := p.s.explain(fv); d != nil {
					bad = append(bad, bson.D{{Key: "propertyName", Value: p.name}, {Key: "details", Value: d}})
				}
			}
			if bad == nil {
				return nil
			}
			return bson.D{{Key: "operatorName", Value: "properties"}, {Key: "propertiesNotSatisfied", Value: bad}}
		}
	case "additionalProperties", "patternProperties":
		// Both are applied together by compileObjectKeywords.
		r.check = func(bson.RawValue) bson.D { return nil }
		if key == "additionalProperties" && v.Type != bson.TypeBoolean && v.Type != bson.TypeEmbeddedDocument {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'additionalProperties' must be either an object or a boolean")
		}
		if key == "patternProperties" && v.Type != bson.TypeEmbeddedDocument {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'patternProperties' must be an object")
		}
	case "minProperties", "maxProperties":
		n, err := needCount(key, v)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeEmbeddedDocument {
				return nil
			}
			l := int64(len(mustElements(x.Document())))
			if (key == "minProperties" && l >= n) || (key == "maxProperties" && l <= n) {
				return nil
			}
			return failed(key, v, "specified number of properties was not satisfied", bson.E{Key: "numberOfProperties", Value: int32(l)})
		}
	case "minItems", "maxItems":
		n, err := needCount(key, v)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeArray {
				return nil
			}
			l := int64(arrayLen(x.Value))
			if (key == "minItems" && l >= n) || (key == "maxItems" && l <= n) {
				return nil
			}
			return failed(key, v, "array did not match specified length", bson.E{Key: "consideredValue", Value: x})
		}
	case "uniqueItems":
		if v.Type != bson.TypeBoolean {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'uniqueItems' must be a boolean")
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeArray || !v.Boolean() {
				return nil
			}
			vals := arrayValues(x.Value)
			for i := range vals {
				for j := 0; j < i; j++ {
					if Equal(vals[i], vals[j]) {
						return failed(key, v, "found a duplicate item", bson.E{Key: "consideredValue", Value: x}, bson.E{Key: "duplicatedValue", Value: vals[i]})
					}
				}
			}
			return nil
		}
	case "items":
		return compileItems(v, depth)
	case "additionalItems":
		if v.Type != bson.TypeBoolean && v.Type != bson.TypeEmbeddedDocument {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'additionalItems' must be either an object or a boolean")
		}
		r.check = func(bson.RawValue) bson.D { return nil } // applied by items
	case "allOf", "anyOf", "oneOf":
		subs, err := needSchemas(key, v, depth)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			var bad bson.A
			matched := 0
			for i, s := range subs {
				if d := s.explain(x); d != nil {
					bad = append(bad, bson.D{{Key: "index", Value: int32(i)}, {Key: "details", Value: d}})
				} else {
					matched++
				}
			}
			switch {
			case key == "allOf" && bad == nil, key == "anyOf" && matched > 0, key == "oneOf" && matched == 1:
				return nil
			case key == "oneOf" && matched > 1:
				return failed(key, v, "more than one subschema matched")
			}
			return bson.D{{Key: "operatorName", Value: key}, {Key: "schemasNotSatisfied", Value: bad}}
		}
	case "not":
		sub, err := needSchema(key, v, depth)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if sub.explain(x) != nil {
				return nil
			}
			return failed(key, v, "child expression matched")
		}
	case "dependencies":
		if v.Type != bson.TypeEmbeddedDocument {
			return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'dependencies' must be an object")
		}
		return compileDependencies(v, depth)
	default:
		return r, schemaErr(mongoerr.FailedToParse, "Unknown $jsonSchema keyword: %s", key)
	}
	return r, nil
}

func mustElements(d bson.Raw) []bson.RawElement {
	es, _ := d.Elements()
	return es
}

func compileItems(v bson.RawValue, depth int) (schemaRule, error) {
	r := schemaRule{}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		s, err := compileSchema(v.Document(), depth+1)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeArray {
				return nil
			}
			for i, e := range arrayValues(x.Value) {
				if d := s.explain(e); d != nil {
					return bson.D{{Key: "operatorName", Value: "items"}, {Key: "reason", Value: "At least one item did not match the sub-schema"},
						{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: d}}
				}
			}
			return nil
		}
	case bson.TypeArray:
		subs, err := needSchemas("items", v, depth)
		if err != nil {
			return r, err
		}
		r.check = func(x bson.RawValue) bson.D {
			if x.Type != bson.TypeArray {
				return nil
			}
			for i, e := range arrayValues(x.Value) {
				if i >= len(subs) {
					break
				}
				if d := subs[i].explain(e); d != nil {
					return bson.D{{Key: "operatorName", Value: "items"}, {Key: "reason", Value: "At least one item did not match the sub-schema"},
						{Key: "itemIndex", Value: int32(i)}, {Key: "details", Value: d}}
				}
			}
			return nil
		}
	default:
		return r, schemaErr(mongoerr.TypeMismatch, "$jsonSchema keyword 'items' must be an array or an object, not %s", typeName(v.Type))
	}
	return r, nil
}

func compileDependencies(v bson.RawValue, depth int) (schemaRule, error) {
	type dep struct {
		name  string
		props []string
		s     *Schema
	}
	var deps []dep
	for _, e := range mustElements(v.Document()) {
		d := dep{name: e.Key()}
		switch ev := e.Value(); ev.Type {
		case bson.TypeEmbeddedDocument:
			s, err := compileSchema(ev.Document(), depth+1)
			if err != nil {
				return schemaRule{}, err
			}
			d.s = s
		case bson.TypeArray:
			for _, p := range arrayValues(ev.Value) {
				if p.Type != bson.TypeString {
					return schemaRule{}, schemaErr(mongoerr.TypeMismatch, "property dependency for '%s' must contain only strings", e.Key())
				}
				d.props = append(d.props, str(p))
			}
		default:
			return schemaRule{}, schemaErr(mongoerr.TypeMismatch, "property '%s' in $jsonSchema keyword 'dependencies' must be either an object or an array", e.Key())
		}
		deps = append(deps, d)
	}
	return schemaRule{check: func(x bson.RawValue) bson.D {
		if x.Type != bson.TypeEmbeddedDocument {
			return nil
		}
		for _, d := range deps {
			if lookup(x.Value, d.name).Type == 0 {
				continue
			}
			if d.s != nil {
				if det := d.s.explain(x); det != nil {
					return bson.D{{Key: "operatorName", Value: "dependencies"}, {Key: "failingDependencies", Value: bson.A{bson.D{{Key: "conditionalProperty", Value: d.name}, {Key: "details", Value: det}}}}}
				}
				continue
			}
			var missing bson.A
			for _, p := range d.props {
				if lookup(x.Value, p).Type == 0 {
					missing = append(missing, p)
				}
			}
			if missing != nil {
				return bson.D{{Key: "operatorName", Value: "dependencies"}, {Key: "failingDependencies", Value: bson.A{bson.D{{Key: "conditionalProperty", Value: d.name}, {Key: "missingProperties", Value: missing}}}}}
			}
		}
		return nil
	}}, nil
}

// explain returns the rules of s that v does not satisfy, nil if none.
func (s *Schema) explain(v bson.RawValue) bson.A {
	var out bson.A
	for _, r := range s.rules {
		if d := r.check(v); d != nil {
			out = append(out, d)
		}
	}
	if d := s.boundsAndObject(v); d != nil {
		out = append(out, d...)
	}
	return out
}

// boundsAndObject applies the keywords that work in pairs: exclusive
// bounds (with minimum/maximum, already checked inclusively) and
// additionalProperties with properties and patternProperties.
func (s *Schema) boundsAndObject(v bson.RawValue) bson.A {
	var out bson.A
	arg := func(name string) (bson.RawValue, bool) {
		for _, r := range s.rules {
			if r.name == name {
				return r.arg, true
			}
		}
		return bson.RawValue{}, false
	}
	if isNumeric(v.Type) {
		for _, k := range [2][2]string{{"minimum", "exclusiveMinimum"}, {"maximum", "exclusiveMaximum"}} {
			bound, ok := arg(k[0])
			excl, ok2 := arg(k[1])
			if ok && ok2 && excl.Boolean() && Compare(v, bound) == 0 {
				out = append(out, bson.D{{Key: "operatorName", Value: k[0]}, {Key: "specifiedAs", Value: bson.D{{Key: k[0], Value: bound}, {Key: k[1], Value: true}}},
					{Key: "reason", Value: "comparison failed"}, {Key: "consideredValue", Value: v}})
			}
		}
	}
	ap, hasAP := arg("additionalProperties")
	pp, hasPP := arg("patternProperties")
	if (!hasAP && !hasPP) || v.Type != bson.TypeEmbeddedDocument {
		return out
	}
	props, _ := arg("properties")
	var patterns []*regexp.Regexp
	var patternSchemas []*Schema
	if pp.Type == bson.TypeEmbeddedDocument {
		for _, e := range mustElements(pp.Document()) {
			re, err1 := compileRegex(e.Key(), "", "")
			ps, err2 := needSchema("patternProperties", e.Value(), 0)
			if err1 == nil && err2 == nil {
				patterns, patternSchemas = append(patterns, re), append(patternSchemas, ps)
			}
		}
	}
	var apSchema *Schema
	if ap.Type == bson.TypeEmbeddedDocument {
		apSchema, _ = compileSchema(ap.Document(), 0)
	}
	var extra bson.A
	for _, e := range mustElements(v.Document()) {
		k := e.Key()
		declared := props.Type == bson.TypeEmbeddedDocument && lookup(props.Value, k).Type != 0
		matched := declared
		for i, re := range patterns {
			if re.MatchString(k) {
				matched = true
				if d := patternSchemas[i].explain(e.Value()); d != nil {
					out = append(out, bson.D{{Key: "operatorName", Value: "patternProperties"}, {Key: "propertiesNotSatisfied", Value: bson.A{bson.D{{Key: "propertyName", Value: k}, {Key: "details", Value: d}}}}})
				}
			}
		}
		if matched {
			continue
		}
		switch {
		case ap.Type == bson.TypeBoolean && !ap.Boolean():
			extra = append(extra, k)
		case apSchema != nil:
			if d := apSchema.explain(e.Value()); d != nil {
				out = append(out, bson.D{{Key: "operatorName", Value: "additionalProperties"}, {Key: "reason", Value: "at least one additional property did not match the subschema"},
					{Key: "failingProperty", Value: k}, {Key: "details", Value: d}})
			}
		}
	}
	if extra != nil {
		out = append(out, bson.D{{Key: "operatorName", Value: "additionalProperties"}, {Key: "specifiedAs", Value: bson.D{{Key: "additionalProperties", Value: false}}},
			{Key: "additionalProperties", Value: extra}})
	}
	return out
}

// Match reports whether doc satisfies the schema.
func (s *Schema) Match(doc bson.Raw) bool { return s.explain(vDoc(doc)) == nil }

// Explain returns mongod's details of why doc fails the schema:
// {operatorName: "$jsonSchema", [title, description,] schemaRulesNotSatisfied: [...]},
// or nil if it does not fail.
func (s *Schema) Explain(doc bson.Raw) bson.D {
	rules := s.explain(vDoc(doc))
	if rules == nil {
		return nil
	}
	d := bson.D{{Key: "operatorName", Value: "$jsonSchema"}}
	for _, k := range []string{"title", "description"} {
		if v, err := s.spec.LookupErr(k); err == nil && v.Type == bson.TypeString {
			d = append(d, bson.E{Key: k, Value: v.StringValue()})
		}
	}
	return append(d, bson.E{Key: "schemaRulesNotSatisfied", Value: rules})
}

// schemaNode is $jsonSchema as a top-level query operator.
type schemaNode struct{ s *Schema }

func (n schemaNode) match(doc bson.Raw, _ *int) bool { return n.s.Match(doc) }

func parseJSONSchema(_ string, v bson.RawValue, _ int) (node, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, schemaErr(mongoerr.TypeMismatch, "$jsonSchema must be an object")
	}
	s, err := CompileSchema(v.Document())
	if err != nil {
		return nil, err
	}
	return schemaNode{s}, nil
}
