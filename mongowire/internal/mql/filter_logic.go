package mql

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Logical query operators: $and, $or, $nor, $not, and constant nodes.

type andNode []node

func (a andNode) match(doc bson.Raw, pos *int) bool {
	for _, n := range a {
		if !n.match(doc, pos) {
			return false
		}
	}
	return true
}

type orNode []node

func (o orNode) match(doc bson.Raw, pos *int) bool {
	for _, n := range o {
		if n.match(doc, pos) {
			return true
		}
	}
	return false
}

type norNode []node

func (o norNode) match(doc bson.Raw, _ *int) bool {
	for _, n := range o {
		if n.match(doc, nil) {
			return false
		}
	}
	return true
}

type notNode struct{ n node }

func (n notNode) match(doc bson.Raw, _ *int) bool { return !n.n.match(doc, nil) }

type constNode bool

func (c constNode) match(bson.Raw, *int) bool { return bool(c) }

// parseLogical parses $and, $or and $nor.
func parseLogical(key string, v bson.RawValue, depth int) (node, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "%s must be an array", key)
	}
	var kids []node
	for _, e := range arrayValues(v.Value) {
		if e.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.BadValue, "$or/$and/$nor entries need to be full objects")
		}
		sub, err := parseFilterDoc(e.Value, depth+1)
		if err != nil {
			return nil, err
		}
		switch len(sub) {
		case 0:
			kids = append(kids, constNode(true))
		case 1:
			kids = append(kids, sub[0])
		default:
			kids = append(kids, andNode(sub))
		}
	}
	if len(kids) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "$and/$or/$nor must be a nonempty array")
	}
	switch key {
	case "$and":
		return andNode(kids), nil
	case "$or":
		return orNode(kids), nil
	}
	return norNode(kids), nil
}

func parseNot(path string, v bson.RawValue, depth int) (node, error) {
	switch v.Type {
	case bson.TypeRegex:
		p, o, _ := v.RegexOK()
		op, err := newRegexOp(p, o)
		if err != nil {
			return nil, err
		}
		return notNode{newFieldNode(path, op)}, nil
	case bson.TypeEmbeddedDocument:
		it := iterDoc(v.Value)
		k, _, ok := it.next()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "$not cannot be empty")
		}
		if len(k) == 0 || k[0] != '$' {
			return nil, mongoerr.New(mongoerr.BadValue, "unknown operator: %s", k)
		}
		n, err := parseOperators(path, v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		return notNode{n}, nil
	}
	return nil, mongoerr.New(mongoerr.BadValue, "$not needs a regex or a document")
}

func parseNotOp(path, _ string, v bson.RawValue, depth int) (node, error) {
	return parseNot(path, v, depth)
}

func isLogicalDoc(doc bson.Raw) bool {
	it := iterDoc(doc)
	k, _, _ := it.next()
	switch string(k) {
	case "$and", "$or", "$nor", "$expr", "$where", "$text", "$comment", "$alwaysTrue", "$alwaysFalse":
		return true
	}
	return false
}
