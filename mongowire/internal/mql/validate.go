package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// MaxDepth is the nesting depth of stored documents the server allows.
const MaxDepth = 100

// Validate checks a document about to be stored, as MongoDB's storage
// validation does: well-formed BSON, elements nested at most maxDepth
// levels (a top-level field is level 1; 0 means MaxDepth), and an _id that
// is not a regex, array or undefined and holds no $-prefixed field names.
// Like MongoDB 5.0 and later, it accepts field names that are empty,
// contain dots or start with '$'.
func Validate(doc bson.Raw, maxDepth int) error {
	if err := doc.Validate(); err != nil {
		return mongoerr.New(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	if maxDepth <= 0 {
		maxDepth = MaxDepth
	}
	if depth(doc, 1, maxDepth) > maxDepth {
		return mongoerr.New(mongoerr.Overflow, "Document exceeds maximum nesting depth of %d", maxDepth)
	}
	id := lookup(doc, "_id")
	switch id.Type {
	case bson.TypeArray, bson.TypeRegex, bson.TypeUndefined:
		return mongoerr.New(mongoerr.InvalidIdField, "The '_id' value cannot be of type %s", typeName(id.Type))
	case bson.TypeEmbeddedDocument:
		if name, ok := dollarField(id.Value); ok {
			return mongoerr.New(mongoerr.DollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", name)
		}
	}
	return nil
}

// dollarField finds a $-prefixed field name (DBRef fields excepted) in
// doc or the documents nested in it.
func dollarField(doc []byte) (string, bool) {
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			return "", false
		}
		if len(k) > 0 && k[0] == '$' {
			switch string(k) {
			case "$ref", "$id", "$db":
			default:
				return string(k), true
			}
		}
		if v.Type == bson.TypeEmbeddedDocument {
			if name, ok := dollarField(v.Value); ok {
				return name, true
			}
		}
	}
}

// depth returns the nesting level of the deepest element of doc, whose
// own elements are at level, stopping once it passes limit.
func depth(doc []byte, level, limit int) int {
	deepest := 0
	it := iterDoc(doc)
	for {
		_, v, ok := it.next()
		if !ok {
			return deepest
		}
		deepest = max(deepest, level)
		if deepest > limit {
			return deepest
		}
		if v.Type == bson.TypeEmbeddedDocument || v.Type == bson.TypeArray {
			deepest = max(deepest, depth(v.Value, level+1, limit))
			if deepest > limit {
				return deepest
			}
		}
	}
}
