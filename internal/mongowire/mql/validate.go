package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

// MaxDepth is the nesting depth of stored documents the server allows.
const MaxDepth = 100

// Validate checks a document about to be stored: well-formed BSON,
// nesting of at most maxDepth documents and arrays (the document itself
// counts as one), and an _id that is not an array, regex or undefined and
// holds no $-prefixed field names. Like MongoDB 5.0 and later, it accepts
// field names that are empty, contain dots or start with '$'.
func Validate(doc bson.Raw, maxDepth int) error {
	if err := doc.Validate(); err != nil {
		return mongoerr.New(mongoerr.InvalidBSON, "invalid document: %v", err)
	}
	if maxDepth <= 0 {
		maxDepth = MaxDepth
	}
	if depth(doc, 1, maxDepth) > maxDepth {
		return mongoerr.New(mongoerr.Overflow, "cannot insert document because it exceeds %d levels of nesting", maxDepth)
	}
	id := lookup(doc, "_id")
	switch id.Type {
	case bson.TypeArray:
		return mongoerr.New(mongoerr.InvalidIdField, "The '_id' value cannot be of type array")
	case bson.TypeRegex:
		return mongoerr.New(mongoerr.BadValue, "can't use a regex for _id")
	case bson.TypeUndefined:
		return mongoerr.New(mongoerr.BadValue, "can't use a undefined for _id")
	case bson.TypeEmbeddedDocument:
		it := iterDoc(id.Value)
		for {
			k, _, ok := it.next()
			if !ok {
				break
			}
			if len(k) > 0 && k[0] == '$' {
				return mongoerr.New(mongoerr.InvalidIdField, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", k)
			}
		}
	}
	return nil
}

// depth returns the nesting depth of doc, stopping once it passes limit.
func depth(doc []byte, d, limit int) int {
	if d > limit {
		return d
	}
	deepest := d
	it := iterDoc(doc)
	for {
		_, v, ok := it.next()
		if !ok {
			return deepest
		}
		if v.Type == bson.TypeEmbeddedDocument || v.Type == bson.TypeArray {
			deepest = max(deepest, depth(v.Value, d+1, limit))
			if deepest > limit {
				return deepest
			}
		}
	}
}
