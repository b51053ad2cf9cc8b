package mql

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestJSONSchemaKeywords(t *testing.T) {
	for _, tc := range []struct {
		schema, doc string
		match       bool
		failing     string // operatorName of the first failing rule
	}{
		{`{"properties": {"s": {"pattern": "^a+$"}}}`, `{"s": "aaa"}`, true, ""},
		{`{"properties": {"s": {"pattern": "^a+$"}}}`, `{"s": "ab"}`, false, "properties"},
		{`{"properties": {"s": {"pattern": "^a+$"}}}`, `{"s": 5}`, true, ""}, // pattern applies to strings only
		{`{"properties": {"n": {"minimum": 1, "exclusiveMinimum": true}}}`, `{"n": 1}`, false, "properties"},
		{`{"properties": {"n": {"minimum": 1, "exclusiveMinimum": true}}}`, `{"n": 1.5}`, true, ""},
		{`{"properties": {"n": {"maximum": 10}}}`, `{"n": 11}`, false, "properties"},
		{`{"properties": {"n": {"multipleOf": 3}}}`, `{"n": 9}`, true, ""},
		{`{"properties": {"n": {"multipleOf": 3}}}`, `{"n": 10}`, false, "properties"},
		{`{"properties": {"a": {"uniqueItems": true}}}`, `{"a": [1, 2, 1]}`, false, "properties"},
		{`{"properties": {"a": {"minItems": 2, "maxItems": 3}}}`, `{"a": [1]}`, false, "properties"},
		{`{"properties": {"a": {"items": [{"type": "string"}, {"type": "number"}]}}}`, `{"a": ["x", 2, true]}`, true, ""},
		{`{"properties": {"a": {"items": [{"type": "string"}, {"type": "number"}]}}}`, `{"a": [2]}`, false, "properties"},
		{`{"properties": {"_id": {}, "a": {}}, "additionalProperties": false}`, `{"_id": 1, "a": 1}`, true, ""},
		{`{"properties": {"_id": {}, "a": {}}, "additionalProperties": false}`, `{"_id": 1, "b": 1}`, false, "additionalProperties"},
		{`{"patternProperties": {"^x": {"type": "string"}}, "additionalProperties": false}`, `{"x1": "s"}`, true, ""},
		{`{"patternProperties": {"^x": {"type": "string"}}}`, `{"x1": 1}`, false, "patternProperties"},
		{`{"additionalProperties": {"type": "number"}}`, `{"a": "s"}`, false, "additionalProperties"},
		{`{"minProperties": 2}`, `{"a": 1}`, false, "minProperties"},
		{`{"maxProperties": 1}`, `{"a": 1, "b": 2}`, false, "maxProperties"},
		{`{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1}`, true, ""},
		{`{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1, "b": 1}`, false, "oneOf"},
		{`{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"c": 1}`, false, "anyOf"},
		{`{"allOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1}`, false, "allOf"},
		{`{"not": {"required": ["a"]}}`, `{"a": 1}`, false, "not"},
		{`{"dependencies": {"a": ["b"]}}`, `{"a": 1}`, false, "dependencies"},
		{`{"dependencies": {"a": {"required": ["c"]}}}`, `{"a": 1, "c": 2}`, true, ""},
		{`{"properties": {"o": {"type": ["object", "null"], "properties": {"x": {"enum": [1, 2]}}}}}`, `{"o": {"x": 3}}`, false, "properties"},
		{`{"properties": {"o": {"type": ["object", "null"]}}}`, `{"o": null}`, true, ""},
		{`{"properties": {"n": {"bsonType": "number"}}}`, `{"n": {"$numberLong": "5"}}`, true, ""},
		{`{"properties": {"s": {"minLength": 2}}}`, `{"s": "é"}`, false, "properties"}, // counted in characters
	} {
		s, err := CompileSchema(doc(t, tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		d := doc(t, tc.doc)
		if got := s.Match(d); got != tc.match {
			t.Errorf("%s on %s: match = %v, want %v", tc.schema, tc.doc, got, tc.match)
			continue
		}
		ex := s.Explain(d)
		if tc.match != (ex == nil) {
			t.Errorf("%s on %s: Explain = %v with match %v", tc.schema, tc.doc, ex, tc.match)
			continue
		}
		if tc.match {
			continue
		}
		got := firstOperator(ex)
		if got != tc.failing {
			t.Errorf("%s on %s: first failing rule = %q, want %q (%v)", tc.schema, tc.doc, got, tc.failing, ex)
		}
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		schema string
		code   int32
		msg    string
	}{
		{`{"bogus": 1}`, mongoerr.FailedToParse, "Unknown $jsonSchema keyword: bogus"},
		{`{"$ref": "#/x"}`, mongoerr.FailedToParse, "'$ref' is not currently supported"},
		{`{"type": "integer"}`, mongoerr.BadValue, "'integer' is not currently supported"},
		{`{"type": "string", "bsonType": "string"}`, mongoerr.FailedToParse, "both $jsonSchema keywords 'type' and 'bsonType'"},
		{`{"required": "a"}`, mongoerr.TypeMismatch, "'required' must be an array"},
		{`{"required": []}`, mongoerr.BadValue, "'required' cannot be an empty array"},
		{`{"minimum": "a"}`, mongoerr.TypeMismatch, "'minimum' must be a number"},
		{`{"properties": {"a": 1}}`, mongoerr.TypeMismatch, "property 'a' must be an object"},
		{`{"minLength": -1}`, mongoerr.FailedToParse, "'minLength' must be a representable as a non-negative integer"},
		{`{"enum": []}`, mongoerr.FailedToParse, "'enum' cannot be an empty array"},
		{`{"pattern": "("}`, 51091, "Regular expression is invalid"},
	} {
		_, err := CompileSchema(doc(t, tc.schema))
		e, ok := mongoerr.As(err)
		if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: error = %v, want code %d mentioning %q", tc.schema, err, tc.code, tc.msg)
		}
	}
}

// firstOperator is the operatorName of the first rule an Explain reports.
func firstOperator(ex bson.D) string {
	for _, e := range ex {
		if e.Key != "schemaRulesNotSatisfied" {
			continue
		}
		rules, _ := e.Value.(bson.A)
		if len(rules) == 0 {
			return ""
		}
		first, _ := rules[0].(bson.D)
		for _, f := range first {
			if f.Key == "operatorName" {
				s, _ := f.Value.(string)
				return s
			}
		}
	}
	return ""
}
