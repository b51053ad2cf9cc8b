package mql

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Update is a compiled update: a document of update operators, a
// replacement document, or an aggregation pipeline. It is safe for
// concurrent use.
type Update struct {
	replacement bson.Raw
	pipeline    *Pipeline
	entries     []*updateEntry // sorted by path, as MongoDB applies them
	filters     map[string]*Filter
}

// ApplyOptions tune Update.Apply.
type ApplyOptions struct {
	Upsert          bool      // the document is being inserted: $setOnInsert applies
	PositionalIndex int       // the array index for `$`, from Filter.MatchPositional (-1: none)
	Now             time.Time // for $currentDate and $$NOW; zero means time.Now()
}

type updateEntry struct {
	op     string
	path   []string
	dotted string
	arg    bson.RawValue

	to       []string // $rename target
	toDotted string
	push     *pushSpec
	each     []bson.RawValue // $addToSet values
	pull     node            // $pull condition over wrapped elements or element documents
	pullWrap bool            // pull tests {"": element}
	pullEq   bool            // pull by equality with arg
	coll     *Collation      // comparisons follow it (WithCollation; nil: binary)
	bitOps   []bitOp
}

type pushSpec struct {
	each     []bson.RawValue
	position *int64
	slice    *int64
	sort     *Sort      // sort by fields of element documents
	sortDir  int        // 1/-1: sort whole elements
	coll     *Collation // the update's (nil: binary)
}

type bitOp struct {
	name string
	v    bson.RawValue
}

// CompileUpdate compiles an update: a document of $-operators, a
// replacement document, or an aggregation pipeline (an array of stages:
// $set/$addFields, $unset, $project, $replaceRoot/$replaceWith).
// arrayFilters bind the identifiers of $[<id>] positional operators.
func CompileUpdate(update bson.RawValue, arrayFilters []bson.Raw) (*Update, error) {
	switch update.Type {
	case bson.TypeArray:
		if len(arrayFilters) > 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "arrayFilters may not be specified for pipeline-style updates")
		}
		var stages []bson.Raw
		for _, s := range arrayValues(update.Value) {
			if s.Type != bson.TypeEmbeddedDocument {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "Each element of the 'pipeline' array must be an object")
			}
			stages = append(stages, s.Value)
		}
		p, err := compilePipeline(stages, true)
		if err != nil {
			return nil, err
		}
		return &Update{pipeline: p}, nil
	case bson.TypeEmbeddedDocument:
	default:
		return nil, mongoerr.New(mongoerr.FailedToParse, "Update argument must be either an object or an array")
	}
	doc := bson.Raw(update.Value)
	if err := doc.Validate(); err != nil {
		return nil, mongoerr.New(mongoerr.InvalidBSON, "invalid update document: %v", err)
	}
	it := iterDoc(doc)
	first, _, ok := it.next()
	if !ok || len(first) == 0 || first[0] != '$' {
		if len(arrayFilters) > 0 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "arrayFilters may not be specified for replacement-style updates")
		}
		if err := checkReplacement(doc); err != nil {
			return nil, err
		}
		return &Update{replacement: doc}, nil
	}
	u := &Update{}
	if err := u.compileFilters(arrayFilters); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	it = iterDoc(doc)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if err := u.compileOperator(string(k), v, used); err != nil {
			return nil, err
		}
	}
	if err := checkConflicts(u.entries); err != nil {
		return nil, err
	}
	for id := range u.filters {
		if !used[id] {
			return nil, mongoerr.New(mongoerr.FailedToParse, "The array filter for identifier '%s' was not used in the update %s", id, docString(doc))
		}
	}
	slices.SortStableFunc(u.entries, func(a, b *updateEntry) int { return comparePaths(a.sortPath(), b.sortPath()) })
	return u, nil
}

// comparePaths orders update paths as MongoDB applies them: field by
// field, numeric array indexes by value, other names bytewise.
func comparePaths(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, xok := arrayIndex(a[i])
		y, yok := arrayIndex(b[i])
		if xok && yok {
			if c := cmpInt(x, y); c != 0 {
				return c
			}
			continue
		}
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmpInt(len(a), len(b))
}

func (e *updateEntry) sortPath() []string {
	if e.op == "$rename" {
		return e.to
	}
	return e.path
}

func checkReplacement(doc bson.Raw) error {
	it := iterDoc(doc)
	for {
		k, _, ok := it.next()
		if !ok {
			return nil
		}
		if len(k) > 0 && k[0] == '$' {
			return mongoerr.New(mongoerr.DollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", k, k)
		}
	}
}

func (u *Update) compileFilters(arrayFilters []bson.Raw) error {
	for _, af := range arrayFilters {
		id := ""
		it := iterDoc(af)
		for {
			k, _, ok := it.next()
			if !ok {
				break
			}
			top, _, _ := strings.Cut(string(k), ".")
			if strings.HasPrefix(top, "$") {
				return mongoerr.New(mongoerr.FailedToParse, "Error parsing array filter :: caused by :: Cannot use an expression without a top-level field name in arrayFilters")
			}
			if id != "" && id != top {
				return mongoerr.New(mongoerr.FailedToParse, "Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, top)
			}
			id = top
		}
		if id == "" {
			return mongoerr.New(mongoerr.FailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		if !validIdentifier(id) {
			return mongoerr.New(mongoerr.BadValue, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
		}
		if _, dup := u.filters[id]; dup {
			return mongoerr.New(mongoerr.FailedToParse, "Found multiple array filters with the same top-level field name %s", id)
		}
		f, err := CompileFilter(af)
		if err != nil {
			return err
		}
		if u.filters == nil {
			u.filters = map[string]*Filter{}
		}
		u.filters[id] = f
	}
	return nil
}

func validIdentifier(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (u *Update) compileOperator(op string, arg bson.RawValue, used map[string]bool) error {
	if _, ok := lookupOperator(updateOperators, op); !ok {
		return mongoerr.New(mongoerr.FailedToParse, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", op)
	}
	if arg.Type != bson.TypeEmbeddedDocument {
		return mongoerr.New(mongoerr.FailedToParse, "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s: %s}", typeName(arg.Type), op, shortString(arg))
	}
	it := iterDoc(arg.Value)
	n := 0
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		n++
		e, err := u.compileEntry(op, string(k), v, used)
		if err != nil {
			return err
		}
		u.entries = append(u.entries, e)
	}
	if n == 0 {
		return mongoerr.New(mongoerr.FailedToParse, "'%s' is empty. You must specify a field like so: {%s: {<field>: ...}}", op, op)
	}
	return nil
}

// parseUpdatePath checks a field path of an update and notes the array
// filter identifiers it uses.
func (u *Update) parseUpdatePath(p string, used map[string]bool) ([]string, error) {
	if p == "" {
		return nil, mongoerr.New(mongoerr.EmptyFieldName, "An empty update path is not valid.")
	}
	parts := strings.Split(p, ".")
	positional := 0
	for i, c := range parts {
		if c == "" {
			return nil, mongoerr.New(mongoerr.EmptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", p)
		}
		if c[0] != '$' {
			continue
		}
		if i == 0 {
			if c == "$" {
				return nil, mongoerr.New(mongoerr.BadValue, "Cannot have positional (i.e. '$') element in the first position in path '%s'", p)
			}
			return nil, mongoerr.New(mongoerr.DollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", c, c)
		}
		switch {
		case c == "$":
			positional++
		case c == "$[]":
		case strings.HasPrefix(c, "$[") && strings.HasSuffix(c, "]"):
			id := c[2 : len(c)-1]
			if _, ok := u.filters[id]; !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "No array filter found for identifier '%s' in path '%s'", id, p)
			}
			used[id] = true
		}
		// Other $-prefixed names below the top level are ordinary field
		// names since MongoDB 5.0.
	}
	if positional > 1 {
		return nil, mongoerr.New(mongoerr.BadValue, "Too many positional (i.e. '$') elements found in path '%s'", p)
	}
	return parts, nil
}

func isDynamic(parts []string) bool {
	for _, c := range parts {
		if isPositionalPart(c) {
			return true
		}
	}
	return false
}

// isPositionalPart reports whether a path part is $, $[] or $[<id>].
func isPositionalPart(c string) bool {
	return c == "$" || strings.HasPrefix(c, "$[") && strings.HasSuffix(c, "]")
}

func (u *Update) compileEntry(op, path string, arg bson.RawValue, used map[string]bool) (*updateEntry, error) {
	parts, err := u.parseUpdatePath(path, used)
	if err != nil {
		return nil, err
	}
	e := &updateEntry{op: op, path: parts, dotted: path, arg: arg}
	fieldArg := func() string { return path + ": " + shortString(arg) }
	switch op {
	case "$inc", "$mul":
		if !isNumeric(arg.Type) {
			verb := "increment"
			if op == "$mul" {
				verb = "multiply"
			}
			return nil, mongoerr.New(mongoerr.TypeMismatch, "Cannot %s with non-numeric argument: {%s}", verb, fieldArg())
		}
	case "$currentDate":
		switch arg.Type {
		case bson.TypeBoolean:
		case bson.TypeEmbeddedDocument:
			valid := false
			it := iterDoc(arg.Value)
			for {
				k, t, ok := it.next()
				if !ok {
					break
				}
				if string(k) != "$type" {
					return nil, mongoerr.New(mongoerr.BadValue, "Unrecognized $currentDate option: %s", k)
				}
				valid = t.Type == bson.TypeString && (str(t) == "date" || str(t) == "timestamp")
			}
			if !valid {
				return nil, mongoerr.New(mongoerr.BadValue, "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
			}
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).", typeName(arg.Type))
		}
	case "$pop":
		if !isNumeric(arg.Type) {
			return nil, mongoerr.New(mongoerr.FailedToParse, "Expected a number in: %s", fieldArg())
		}
		if f := asFloat(arg); f != 1 && f != -1 {
			return nil, mongoerr.New(mongoerr.FailedToParse, "$pop expects 1 or -1, found: %s", shortString(arg))
		}
	case "$pullAll":
		if arg.Type != bson.TypeArray {
			return nil, mongoerr.New(mongoerr.BadValue, "$pullAll requires an array argument but was given a %s", typeName(arg.Type))
		}
		e.each = arrayValues(arg.Value)
	case "$pull":
		if err := e.compilePull(); err != nil {
			return nil, err
		}
	case "$push":
		ps, err := compilePush(arg)
		if err != nil {
			return nil, err
		}
		e.push = ps
	case "$addToSet":
		e.each = []bson.RawValue{arg}
		if arg.Type == bson.TypeEmbeddedDocument {
			it := iterDoc(arg.Value)
			if k, v, ok := it.next(); ok && string(k) == "$each" {
				if v.Type != bson.TypeArray {
					return nil, mongoerr.New(mongoerr.TypeMismatch, "The argument to $each in $addToSet must be an array but it was of type %s", typeName(v.Type))
				}
				if _, _, more := it.next(); more {
					return nil, mongoerr.New(mongoerr.BadValue, "Found unexpected fields after $each in $addToSet: %s", docString(arg.Value))
				}
				e.each = arrayValues(v.Value)
			}
		}
	case "$rename":
		if arg.Type != bson.TypeString {
			return nil, mongoerr.New(mongoerr.BadValue, "The 'to' field for $rename must be a string: %s", fieldArg())
		}
		to := str(arg)
		if isDynamic(parts) {
			return nil, mongoerr.New(mongoerr.BadValue, "The source field for $rename may not be dynamic: %s", path)
		}
		toParts, err := u.parseUpdatePath(to, used)
		if err != nil {
			return nil, err
		}
		if isDynamic(toParts) {
			return nil, mongoerr.New(mongoerr.BadValue, "The destination field for $rename may not be dynamic: %s", to)
		}
		if to == path {
			return nil, mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must differ: %s", fieldArg())
		}
		if isPrefix(parts, toParts) || isPrefix(toParts, parts) {
			return nil, mongoerr.New(mongoerr.BadValue, "The source and target field for $rename must not be on the same path: %s", fieldArg())
		}
		e.to, e.toDotted = toParts, to
	case "$bit":
		if arg.Type != bson.TypeEmbeddedDocument {
			return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier is not compatible with a %s. You must pass in an embedded document: {$bit: {field: {and/or/xor: #}}", typeName(arg.Type))
		}
		it := iterDoc(arg.Value)
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			name := string(k)
			if name != "and" && name != "or" && name != "xor" {
				return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown operator: {%s: %s}", name, name, shortString(v))
			}
			if v.Type != bson.TypeInt32 && v.Type != bson.TypeInt64 {
				return nil, mongoerr.New(mongoerr.BadValue, "The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: {%s: %s}", typeName(v.Type), name, shortString(v))
			}
			e.bitOps = append(e.bitOps, bitOp{name, v})
		}
		if len(e.bitOps) == 0 {
			return nil, mongoerr.New(mongoerr.BadValue, "You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}")
		}
	}
	return e, nil
}

func isPrefix(prefix, path []string) bool {
	return len(prefix) <= len(path) && slices.Equal(prefix, path[:len(prefix)])
}

func (e *updateEntry) compilePull() error {
	arg := e.arg
	switch {
	case isOperatorDoc(arg) && !isLogicalDoc(arg.Value):
		n, err := parseOperators("", arg.Value, 1)
		if err != nil {
			return err
		}
		e.pull, e.pullWrap = n, true
	case arg.Type == bson.TypeEmbeddedDocument:
		f, err := CompileFilter(arg.Value)
		if err != nil {
			return err
		}
		if f.root == nil {
			e.pull = constNode(true)
		} else {
			e.pull = f.root
		}
	case arg.Type == bson.TypeRegex:
		p, o, _ := arg.RegexOK()
		op, err := newRegexOp(p, o)
		if err != nil {
			return err
		}
		e.pull, e.pullWrap = newFieldNode("", op), true
	default:
		e.pullEq = true
	}
	return nil
}

func compilePush(arg bson.RawValue) (*pushSpec, error) {
	ps := &pushSpec{each: []bson.RawValue{arg}}
	if arg.Type != bson.TypeEmbeddedDocument || lookup(arg.Value, "$each").Type == 0 {
		return ps, nil
	}
	it := iterDoc(arg.Value)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch string(k) {
		case "$each":
			if v.Type != bson.TypeArray {
				return nil, mongoerr.New(mongoerr.BadValue, "The argument to $each in $push must be an array but it was of type: %s", typeName(v.Type))
			}
			ps.each = arrayValues(v.Value)
		case "$slice":
			n, ok := integral(v)
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "The value for $slice must be an integer value but was given type: %s", typeName(v.Type))
			}
			ps.slice = &n
		case "$position":
			n, ok := integral(v)
			if !ok {
				return nil, mongoerr.New(mongoerr.BadValue, "The value for $position must be an integer value, not of type: %s", typeName(v.Type))
			}
			ps.position = &n
		case "$sort":
			switch {
			case isNumeric(v.Type):
				f := asFloat(v)
				if f != 1 && f != -1 {
					return nil, mongoerr.New(mongoerr.BadValue, "The $sort element value must be either 1 or -1")
				}
				ps.sortDir = int(f)
			case v.Type == bson.TypeEmbeddedDocument:
				if arrayLen(v.Value) == 0 {
					return nil, mongoerr.New(mongoerr.BadValue, "The $sort pattern is empty when it should be a set of fields.")
				}
				s, err := CompileSort(v.Value)
				if err != nil {
					return nil, mongoerr.New(mongoerr.BadValue, "The $sort element value must be either 1 or -1")
				}
				ps.sort = s
			default:
				return nil, mongoerr.New(mongoerr.BadValue, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
			}
		default:
			return nil, mongoerr.New(mongoerr.BadValue, "Unrecognized clause in $push: %s", k)
		}
	}
	return ps, nil
}

// integral returns v as an int64 if it is a number with an integral value.
func integral(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return asInt64(v), true
	case bson.TypeDouble, bson.TypeDecimal128:
		f := asFloat(v)
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// checkConflicts refuses two updates of the same path, or of a path and
// one of its prefixes (40 ConflictingUpdateOperators).
func checkConflicts(entries []*updateEntry) error {
	type seen struct {
		parts  []string
		dotted string
	}
	var paths []seen
	add := func(parts []string, dotted string) error {
		for _, p := range paths {
			switch {
			case isPrefix(p.parts, parts):
				return mongoerr.New(mongoerr.ConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'", dotted, p.dotted)
			case isPrefix(parts, p.parts):
				return mongoerr.New(mongoerr.ConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'", dotted, dotted)
			}
		}
		paths = append(paths, seen{parts, dotted})
		return nil
	}
	for _, e := range entries {
		if err := add(e.path, e.dotted); err != nil {
			return err
		}
		if e.op == "$rename" {
			if err := add(e.to, e.toDotted); err != nil {
				return err
			}
		}
	}
	return nil
}
