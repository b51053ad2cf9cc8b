package mql

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Parsing.

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

func parseTopLevel(key string, v bson.RawValue, depth int) (node, error) {
	switch key {
	case "$and", "$or", "$nor":
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
	case "$expr":
		e, err := CompileExpr(v)
		if err != nil {
			return nil, err
		}
		return exprMatchNode{e}, nil
	case "$comment":
		return nil, nil
	case "$alwaysTrue":
		return constNode(true), nil
	case "$alwaysFalse":
		return constNode(false), nil
	case "$id", "$ref", "$db":
		return newFieldNode(key, newEqOp(v)), nil
	case "$text":
		// No collection here has a text index.
		return nil, mongoerr.New(mongoerr.IndexNotFound, "text index required for $text query")
	case "$where", "$jsonSchema", "$sampleRate":
		return nil, mongoerr.New(mongoerr.BadValue, "%s is not supported by this server", key)
	}
	return nil, mongoerr.New(mongoerr.BadValue, "unknown top level operator: %s", key)
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

func newEqOp(v bson.RawValue) *eqOp {
	return &eqOp{v: v, null: v.Type == bson.TypeNull}
}

func newRegexOp(pattern, options string) (*regexOp, error) {
	re, err := compileRegex(pattern, options, "")
	if err != nil {
		return nil, err
	}
	return &regexOp{re: re, pattern: pattern, options: options}, nil
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

// errUndefinedOperand is mongod's refusal of the deprecated undefined as
// the operand of an equality or comparison.
var errUndefinedOperand = mongoerr.New(mongoerr.BadValue, "cannot compare to undefined")

func parseOperator(path, name string, v bson.RawValue, depth int) (node, error) {
	switch name {
	case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
		if v.Type == bson.TypeUndefined {
			return nil, errUndefinedOperand
		}
	}
	switch name {
	case "$eq":
		return newFieldNode(path, newEqOp(v)), nil
	case "$ne":
		if v.Type == bson.TypeRegex {
			return nil, mongoerr.New(mongoerr.BadValue, "Can't have regex as arg to $ne.")
		}
		return notNode{newFieldNode(path, newEqOp(v))}, nil
	case "$gt", "$gte", "$lt", "$lte":
		if v.Type == bson.TypeRegex {
			return nil, mongoerr.New(mongoerr.BadValue, "Can't have RegEx as arg to predicate over field '%s'.", path)
		}
		return newFieldNode(path, &cmpOp{name: name, v: v}), nil
	case "$in", "$nin":
		op, err := parseIn(name, v)
		if err != nil {
			return nil, err
		}
		if name == "$nin" {
			return notNode{newFieldNode(path, op)}, nil
		}
		return newFieldNode(path, op), nil
	case "$exists":
		if truthy(v) {
			return newFieldNode(path, existsOp{}), nil
		}
		return notNode{newFieldNode(path, existsOp{})}, nil
	case "$type":
		op, err := parseType(v)
		if err != nil {
			return nil, err
		}
		return newFieldNode(path, op), nil
	case "$size":
		n, err := parseSize(v)
		if err != nil {
			return nil, err
		}
		return newFieldNode(path, &sizeOp{n: n}), nil
	case "$all":
		return parseAll(path, v, depth)
	case "$elemMatch":
		op, err := parseElemMatch(v, depth)
		if err != nil {
			return nil, err
		}
		return newFieldNode(path, op), nil
	case "$mod":
		op, err := parseMod(v)
		if err != nil {
			return nil, err
		}
		return newFieldNode(path, op), nil
	case "$not":
		return parseNot(path, v, depth)
	case "$comment":
		return nil, nil
	case "$where":
		return nil, mongoerr.New(mongoerr.BadValue, "$where cannot be applied to a field")
	case "$geoWithin", "$geoIntersects", "$near", "$nearSphere", "$bitsAllSet", "$bitsAllClear",
		"$bitsAnySet", "$bitsAnyClear", "$text", "$jsonSchema":
		return nil, mongoerr.New(mongoerr.BadValue, "%s is not supported by this server", name)
	}
	return nil, mongoerr.New(mongoerr.BadValue, "unknown operator: %s", name)
}

func parseIn(name string, v bson.RawValue) (*inOp, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "%s needs an array", name)
	}
	op := &inOp{}
	for _, e := range arrayValues(v.Value) {
		switch {
		case e.Type == bson.TypeRegex:
			p, o, _ := e.RegexOK()
			re, err := compileRegex(p, o, "")
			if err != nil {
				return nil, err
			}
			op.res = append(op.res, re)
			// A regex in $in also matches an identical stored regex.
			op.vals = append(op.vals, e)
		case isOperatorDoc(e):
			return nil, mongoerr.New(mongoerr.BadValue, "cannot nest $ under %s", name)
		case e.Type == bson.TypeNull:
			op.hasNull = true
		case e.Type == bson.TypeUndefined:
			return nil, mongoerr.New(mongoerr.BadValue, "InMatchExpression equality cannot be undefined")
		default:
			op.vals = append(op.vals, e)
		}
	}
	if len(op.vals) >= inSetMin {
		op.set = make(map[string]struct{}, len(op.vals))
		for _, v := range op.vals {
			op.set[string(appendKey(nil, v))] = struct{}{}
		}
	}
	return op, nil
}

func parseType(v bson.RawValue) (*typeOp, error) {
	op := &typeOp{}
	add := func(e bson.RawValue) error {
		switch {
		case e.Type == bson.TypeString:
			name := str(e)
			if name == "number" {
				op.number = true
				return nil
			}
			t, ok := typeNames[name]
			if !ok {
				return mongoerr.New(mongoerr.BadValue, "Unknown type name alias: %s", name)
			}
			op.types = append(op.types, t)
		case isNumeric(e.Type):
			f := asFloat(e)
			if f != math.Trunc(f) {
				return mongoerr.New(mongoerr.BadValue, "Invalid numerical type code: %s", shortString(e))
			}
			code := int(f)
			switch {
			case code == -1:
				op.types = append(op.types, bson.TypeMinKey)
			case code == 127:
				op.types = append(op.types, bson.TypeMaxKey)
			case code >= 1 && code <= 19:
				op.types = append(op.types, bson.Type(code))
			default:
				return mongoerr.New(mongoerr.BadValue, "Invalid numerical type code: %d", code)
			}
		default:
			return mongoerr.New(mongoerr.TypeMismatch, "type must be represented as a number or a string")
		}
		return nil
	}
	if v.Type == bson.TypeArray {
		for _, e := range arrayValues(v.Value) {
			if err := add(e); err != nil {
				return nil, err
			}
		}
		if len(op.types) == 0 && !op.number {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$type must match at least one type")
		}
		return op, nil
	}
	return op, add(v)
}

func parseAll(path string, v bson.RawValue, depth int) (node, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "$all needs an array")
	}
	elems := arrayValues(v.Value)
	if len(elems) == 0 {
		return constNode(false), nil
	}
	var nodes andNode
	firstElemMatch := isElemMatchDoc(elems[0])
	for _, e := range elems {
		if firstElemMatch != isElemMatchDoc(e) && firstElemMatch {
			return nil, mongoerr.New(mongoerr.BadValue, "$all/$elemMatch has to be consistent")
		}
		if isOperatorDoc(e) {
			it := iterDoc(e.Value)
			k, arg, _ := it.next()
			// Only a list that starts with $elemMatch holds operators.
			if !firstElemMatch || string(k) != "$elemMatch" {
				return nil, mongoerr.New(mongoerr.BadValue, "no $ expressions in $all")
			}
			op, err := parseElemMatch(arg, depth)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, newFieldNode(path, op))
			continue
		}
		if e.Type == bson.TypeRegex {
			p, o, _ := e.RegexOK()
			op, err := newRegexOp(p, o)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, newFieldNode(path, op))
			continue
		}
		nodes = append(nodes, newFieldNode(path, newEqOp(e)))
	}
	return nodes, nil
}

func isElemMatchDoc(v bson.RawValue) bool {
	if v.Type != bson.TypeEmbeddedDocument {
		return false
	}
	it := iterDoc(v.Value)
	k, _, _ := it.next()
	return string(k) == "$elemMatch"
}

func parseElemMatch(v bson.RawValue, depth int) (*elemMatchOp, error) {
	if v.Type != bson.TypeEmbeddedDocument {
		return nil, mongoerr.New(mongoerr.BadValue, "$elemMatch needs an Object")
	}
	if isOperatorDoc(v) && !isLogicalDoc(v.Value) {
		// Value form: {$elemMatch: {$gt: 1, $lt: 5}} tests each element.
		n, err := parseOperators("", v.Value, depth+1)
		if err != nil {
			return nil, err
		}
		return &elemMatchOp{sub: n, valueForm: true}, nil
	}
	nodes, err := parseFilterDoc(v.Value, depth+1)
	if err != nil {
		return nil, err
	}
	var sub node = andNode(nodes)
	if len(nodes) == 1 {
		sub = nodes[0]
	}
	return &elemMatchOp{sub: sub}, nil
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

// parseMod parses {$mod: [divisor, remainder]} in mongod's order
// (parseMOD): each element is checked for presence and type before the
// next, and both are truncated to 64-bit integers as BSONElement's
// tryCoerce does.
func parseMod(v bson.RawValue) (*modOp, error) {
	if v.Type != bson.TypeArray {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, needs to be an array")
	}
	elems := arrayValues(v.Value)
	var n [2]int64
	for i, what := range []string{"divisor", "remainder"} {
		if len(elems) <= i {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, not enough elements")
		}
		if !isNumeric(elems[i].Type) {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, %s not a number", what)
		}
		x, reason := coerceInt64(elems[i])
		if reason != "" {
			return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, %s value is invalid :: caused by :: %s", what, reason)
		}
		n[i] = x
	}
	if len(elems) > 2 {
		return nil, mongoerr.New(mongoerr.BadValue, "malformed mod, too many elements")
	}
	if n[0] == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "divisor cannot be 0")
	}
	return &modOp{d: n[0], r: n[1]}, nil
}

// coerceInt64 truncates a number toward zero to an int64, or says why it
// cannot, in the words of mongod's BSONElement::tryCoerce.
func coerceInt64(v bson.RawValue) (int64, string) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return asInt64(v), ""
	}
	f := asFloat(v)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, "Unable to coerce NaN/Inf to integral type"
	case f >= 0x1p63 || f < -0x1p63:
		return 0, "Out of bounds coercing to integral value"
	}
	return int64(f), ""
}

// parseSize parses the argument of $size as mongod does
// (BSONElement::parseIntegerElementToNonNegativeInt): a number with an
// integral value from 0 to 2^31-1.
func parseSize(v bson.RawValue) (int, error) {
	fail := func(reason string) error {
		return mongoerr.New(mongoerr.BadValue, "Failed to parse $size. %s$size: %s", reason, shortString(v))
	}
	if !isNumeric(v.Type) {
		return 0, fail("Expected a number in: ")
	}
	var n int64
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		n = asInt64(v)
	default:
		f := asFloat(v)
		switch {
		case math.IsNaN(f):
			return 0, fail("Expected an integer, but found NaN in: ")
		case f >= 0x1p63 || f < -0x1p63:
			return 0, fail("Cannot represent as a 64-bit integer: ")
		case f != math.Trunc(f):
			return 0, fail("Expected an integer: ")
		}
		n = int64(f)
	}
	switch {
	case n < 0:
		return 0, fail("Expected a positive number in: ")
	case n > math.MaxInt32:
		return 0, fail("Cannot represent as a 32-bit integer: ")
	}
	return int(n), nil
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
