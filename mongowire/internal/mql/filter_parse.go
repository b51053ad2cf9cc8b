package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Parsing a filter into nodes: the operators come from topLevelOperators
// and fieldOperators (operators.go), whose parsers live in the filter_*.go
// file of their family.

func parseFilterDoc(doc bson.Raw, depth int) ([]node, error) {
	if depth > maxFilterDepth {
		return nil, mongoerr.New(mongoerr.BadValue, "exceeded maximum query tree depth of %d at %s", maxFilterDepth, docString(doc))
	}
	var nodes []node
	it := iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		key := string(k)
		var n node
		var err error
		if strings.HasPrefix(key, "$") {
			n, err = parseTopLevel(key, v, depth)
		} else {
			n, err = parseField(key, v, depth)
		}
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// parseTopLevel parses {key: v} for a key starting with '$', with the
// operator of that name in topLevelOperators.
func parseTopLevel(key string, v bson.RawValue, depth int) (node, error) {
	op, ok := lookupOperator(topLevelOperators, key)
	if !ok {
		return nil, mongoerr.New(mongoerr.BadValue, "unknown top level operator: %s", key)
	}
	return op.parse(key, v, depth)
}

// parseComment parses $comment, at the top level or on a field: it
// matches everything and is dropped.
func parseComment(_ string, _ bson.RawValue, _ int) (node, error) { return nil, nil }

func parseAlwaysTrue(string, bson.RawValue, int) (node, error)  { return constNode(true), nil }
func parseAlwaysFalse(string, bson.RawValue, int) (node, error) { return constNode(false), nil }

// parseDBRefField parses the DBRef fields $id, $ref and $db, which are
// field names, not operators.
func parseDBRefField(key string, v bson.RawValue, _ int) (node, error) {
	return newFieldNode(key, newEqOp(v)), nil
}

// refuseTopLevel refuses a top-level operator MongoDB has and this
// package does not implement.
func refuseTopLevel(key string, _ bson.RawValue, _ int) (node, error) {
	return nil, mongoerr.New(mongoerr.BadValue, "%s is not supported by this server", key)
}

// isOperatorDoc reports whether v is a document of query operators: its
// first field starts with '$' (DBRef fields $ref/$id/$db excepted).
func isOperatorDoc(v bson.RawValue) bool {
	if v.Type != bson.TypeEmbeddedDocument {
		return false
	}
	it := iterDoc(v.Value)
	k, _, ok := it.next()
	if !ok || len(k) == 0 || k[0] != '$' {
		return false
	}
	// A DBRef ({$ref, $id[, $db]}) is a value to compare, not operators.
	return lookup(v.Value, "$ref").Type == 0 || lookup(v.Value, "$id").Type == 0
}

func parseField(path string, v bson.RawValue, depth int) (node, error) {
	switch {
	case v.Type == bson.TypeRegex:
		p, o, _ := v.RegexOK()
		op, err := newRegexOp(p, o)
		if err != nil {
			return nil, err
		}
		return newFieldNode(path, op), nil
	case isOperatorDoc(v):
		return parseOperators(path, v.Value, depth)
	case v.Type == bson.TypeUndefined:
		return nil, errUndefinedOperand
	}
	return newFieldNode(path, newEqOp(v)), nil
}

// parseOperators compiles {$op: arg, ...} for one path; the operators are
// joined by AND, each evaluated on its own over the path's values.
func parseOperators(path string, ops bson.Raw, depth int) (node, error) {
	var nodes []node
	regex, hasRegex := bson.RawValue{}, false
	options, hasOptions := "", false
	it := iterDoc(ops)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "$regex":
			if v.Type != bson.TypeString && v.Type != bson.TypeRegex {
				return nil, mongoerr.New(mongoerr.BadValue, "$regex has to be a string")
			}
			regex, hasRegex = v, true
			continue
		case "$options":
			if v.Type != bson.TypeString {
				return nil, mongoerr.New(mongoerr.BadValue, "$options has to be a string")
			}
			options, hasOptions = str(v), true
			continue
		}
		n, err := parseOperator(path, string(k), v, depth)
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	if hasOptions && !hasRegex {
		return nil, mongoerr.New(mongoerr.BadValue, "$options needs a $regex")
	}
	if hasRegex {
		var pattern, opts string
		if regex.Type == bson.TypeRegex {
			pattern, opts, _ = regex.RegexOK()
			if hasOptions {
				if opts != "" {
					return nil, mongoerr.New(51075, "options set in both $regex and $options")
				}
				opts = options
			}
		} else {
			pattern, opts = str(regex), options
		}
		op, err := newRegexOp(pattern, opts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, newFieldNode(path, op))
	}
	switch len(nodes) {
	case 0:
		return constNode(true), nil
	case 1:
		return nodes[0], nil
	}
	return andNode(nodes), nil
}

// parseOperator parses {path: {name: v}} with the operator of that name
// in fieldOperators.
func parseOperator(path, name string, v bson.RawValue, depth int) (node, error) {
	op, ok := lookupOperator(fieldOperators, name)
	if !ok || op.parse == nil { // $regex and $options never get here: parseOperators combines them
		return nil, mongoerr.New(mongoerr.BadValue, "unknown operator: %s", name)
	}
	return op.parse(path, name, v, depth)
}

func parseFieldComment(string, string, bson.RawValue, int) (node, error) { return nil, nil }

// refuseField refuses a field operator MongoDB has and this package does
// not implement.
func refuseField(_, name string, _ bson.RawValue, _ int) (node, error) {
	return nil, mongoerr.New(mongoerr.BadValue, "%s is not supported by this server", name)
}
