package mql

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

// emptyFieldName is MongoDB's EmptyFieldName code.
const emptyFieldName int32 = 56

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
	bitOps   []bitOp
}

type pushSpec struct {
	each     []bson.RawValue
	position *int64
	slice    *int64
	sort     *Sort // sort by fields of element documents
	sortDir  int   // 1/-1: sort whole elements
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
		p, err := compilePipeline(stages, updateStages)
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

var updateOperators = map[string]bool{
	"$set": true, "$unset": true, "$inc": true, "$mul": true, "$min": true, "$max": true,
	"$rename": true, "$setOnInsert": true, "$currentDate": true, "$push": true,
	"$addToSet": true, "$pop": true, "$pull": true, "$pullAll": true, "$bit": true,
}

func (u *Update) compileOperator(op string, arg bson.RawValue, used map[string]bool) error {
	if !updateOperators[op] {
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
		return nil, mongoerr.New(emptyFieldName, "An empty update path is not valid.")
	}
	parts := strings.Split(p, ".")
	positional := 0
	for i, c := range parts {
		if c == "" {
			return nil, mongoerr.New(emptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", p)
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

// IsReplacement reports whether u replaces the whole document.
func (u *Update) IsReplacement() bool { return u.replacement != nil }

// Apply applies u to doc and returns the new document, or doc itself
// when nothing changed. A failing update (changing _id, $inc on a string,
// a path that cannot be created) returns the error and no document.
func (u *Update) Apply(doc bson.Raw, opts ApplyOptions) (bson.Raw, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	oldID := lookup(doc, "_id")
	var out bson.Raw
	switch {
	case u.replacement != nil:
		out = u.replacement
		if oldID.Type != 0 && lookup(out, "_id").Type == 0 {
			d := newDoc(len(out) + len(oldID.Value) + 8)
			d.add("_id", oldID)
			it := iterDoc(out)
			for {
				k, v, ok := it.next()
				if !ok {
					break
				}
				d.addBytesKey(k, v)
			}
			out = d.done()
		}
	case u.pipeline != nil:
		res, err := u.pipeline.run(nil, []bson.Raw{doc}, opts.Now)
		if err != nil {
			return nil, err
		}
		if len(res) != 1 {
			return nil, mongoerr.New(mongoerr.InternalError, "pipeline update produced %d documents", len(res))
		}
		out = res[0]
		if oldID.Type != 0 && lookup(out, "_id").Type == 0 {
			d := newDoc(len(out) + 16)
			d.add("_id", oldID)
			it := iterDoc(out)
			for {
				k, v, ok := it.next()
				if !ok {
					break
				}
				d.addBytesKey(k, v)
			}
			out = d.done()
		}
	default:
		a := &applier{u: u, opts: opts, root: rawNode(vDoc(doc)), doc: doc}
		a.root.load()
		for _, e := range u.entries {
			if e.op == "$setOnInsert" && !opts.Upsert {
				continue
			}
			if err := a.apply(e); err != nil {
				return nil, err
			}
		}
		out = a.root.encodeDoc(make([]byte, 0, len(doc)+32))
		if oldID.Type != 0 {
			// Like mongod, compare _id by value: 1 may become 1.0.
			if newID := lookup(out, "_id"); newID.Type == 0 || Compare(newID, oldID) != 0 {
				return nil, mongoerr.New(mongoerr.ImmutableField, "Performing an update on the path '%s' would modify the immutable field '_id'", u.idPath())
			}
		}
	}
	if bytes.Equal(out, doc) {
		return doc, nil
	}
	if u.entries == nil && oldID.Type != 0 {
		if newID := lookup(out, "_id"); Compare(newID, oldID) != 0 {
			return nil, mongoerr.New(mongoerr.ImmutableField, "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", shortString(newID))
		}
	}
	return out, nil
}

// idPath is the first update path that reaches _id.
func (u *Update) idPath() string {
	for _, e := range u.entries {
		if e.path[0] == "_id" {
			return e.dotted
		}
		if e.op == "$rename" && e.to[0] == "_id" {
			return e.toDotted
		}
	}
	return "_id"
}

// applier applies the entries of one update to one document.
type applier struct {
	u      *Update
	opts   ApplyOptions
	root   *mnode
	doc    bson.Raw
	strict bool // a path through a scalar is an error, not a no-op
}

// idString renders the document's _id as MongoDB's error messages do.
func (a *applier) idString() string {
	return "{_id: " + shortString(lookup(a.doc, "_id")) + "}"
}

// target is one concrete location an update path resolved to.
type target struct {
	parent *mnode
	key    string
	path   string // concrete dotted path, for messages
}

// resolve expands the positional parts of path and returns the concrete
// targets under n. When create is set, missing intermediate documents are
// created (as $set does); otherwise a missing or scalar intermediate
// yields no target.
func (a *applier) resolve(n *mnode, path []string, prefix string, create bool, out []target) ([]target, error) {
	comp := path[0]
	keys := []string{comp}
	if isPositionalPart(comp) {
		if n.typ() != bson.TypeArray {
			if comp == "$" {
				return nil, mongoerr.New(mongoerr.BadValue, "The positional operator did not find the match needed from the query.")
			}
			return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply array updates to non-array element %s: %s", lastPart(prefix), shortString(n.value()))
		}
		n.load()
		switch {
		case comp == "$":
			if a.opts.PositionalIndex < 0 {
				return nil, mongoerr.New(mongoerr.BadValue, "The positional operator did not find the match needed from the query.")
			}
			keys = []string{strconv.Itoa(a.opts.PositionalIndex)}
		case comp == "$[]":
			keys = keys[:0]
			for i := range n.kids {
				keys = append(keys, strconv.Itoa(i))
			}
		default:
			f := a.u.filters[comp[2:len(comp)-1]]
			id := comp[2 : len(comp)-1]
			keys = keys[:0]
			for i, k := range n.kids {
				d := newDoc(64)
				d.add(id, k.value())
				if f.Match(d.done()) {
					keys = append(keys, strconv.Itoa(i))
				}
			}
		}
	}
	for _, key := range keys {
		full := key
		if prefix != "" {
			full = prefix + "." + key
		}
		if len(path) == 1 {
			if n.typ() == bson.TypeArray {
				if _, ok := arrayIndex(key); !ok {
					if !create {
						continue
					}
					return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", key, lastPart(prefix), shortString(n.value()))
				}
			}
			out = append(out, target{parent: n, key: key, path: full})
			continue
		}
		c := n.child(key)
		if n.typ() == bson.TypeArray {
			if _, ok := arrayIndex(key); !ok {
				if !create && a.strict {
					return nil, a.notViable(key, prefix, path, n)
				}
				if !create {
					continue
				}
				return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", key, lastPart(prefix), shortString(n.value()))
			}
		}
		if c == nil {
			if !create {
				continue
			}
			if isPositionalPart(path[1]) {
				return nil, mongoerr.New(mongoerr.BadValue, "The path '%s' must exist in the document in order to apply array updates.", full)
			}
			c = newDocNode()
			n.set(key, c)
		}
		if !c.isContainer() {
			if !create && a.strict {
				return nil, a.notViable(path[1], full, path[1:], c)
			}
			if !create {
				continue
			}
			if isPositionalPart(path[1]) {
				return nil, mongoerr.New(mongoerr.BadValue, "Cannot apply array updates to non-array element %s: %s", key, shortString(c.value()))
			}
			return nil, mongoerr.New(mongoerr.PathNotViable, "Cannot create field '%s' in element {%s: %s}", path[1], key, shortString(c.value()))
		}
		var err error
		out, err = a.resolve(c, path[1:], full, create, out)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notViable is the error of $pop, $pull and $pullAll when their path
// runs into a value it cannot traverse.
func (a *applier) notViable(part, taken string, rest []string, n *mnode) error {
	return mongoerr.New(mongoerr.PathNotViable, "Cannot use the part (%s) of (%s.%s) to traverse the element ({%s: %s})",
		part, taken, strings.Join(rest, "."), lastPart(taken), shortString(n.value()))
}

func lastPart(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func createsPath(op string) bool {
	switch op {
	case "$unset", "$pop", "$pull", "$pullAll":
		return false
	}
	return true
}

func (a *applier) apply(e *updateEntry) error {
	if e.op == "$rename" {
		return a.rename(e)
	}
	a.strict = e.op == "$pop" || e.op == "$pull" || e.op == "$pullAll"
	targets, err := a.resolve(a.root, e.path, "", createsPath(e.op), nil)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if err := a.applyAt(e, t); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applyAt(e *updateEntry, t target) error {
	cur := t.parent.child(t.key)
	setVal := func(v bson.RawValue) {
		if cur != nil && !cur.open && cur.raw.Type == v.Type && bytes.Equal(cur.raw.Value, v.Value) {
			return
		}
		t.parent.set(t.key, rawNode(v))
	}
	switch e.op {
	case "$set", "$setOnInsert":
		setVal(e.arg)
	case "$unset":
		if cur != nil {
			t.parent.remove(t.key)
		}
	case "$inc", "$mul":
		if cur == nil {
			if e.op == "$inc" {
				setVal(e.arg)
			} else {
				setVal(zeroLike(e.arg))
			}
			return nil
		}
		v := cur.value()
		if !isNumeric(v.Type) {
			return mongoerr.New(mongoerr.TypeMismatch, "Cannot apply %s to a value of non-numeric type. %s has the field '%s' of non-numeric type %s", e.op, a.idString(), t.key, typeName(v.Type))
		}
		op := opAdd
		if e.op == "$mul" {
			op = opMul
		}
		r := arith(op, v, e.arg)
		if r.Type == bson.TypeDouble && v.Type != bson.TypeDouble && e.arg.Type != bson.TypeDouble {
			// Integer overflow past int64: MongoDB refuses the write.
			return mongoerr.New(mongoerr.BadValue, "Failed to apply %s operations to current value (%s) for document %s", e.op, safeNumString(v), a.idString())
		}
		setVal(r)
	case "$min", "$max":
		if cur == nil {
			setVal(e.arg)
			return nil
		}
		c := Compare(e.arg, cur.value())
		if (e.op == "$min" && c < 0) || (e.op == "$max" && c > 0) {
			setVal(e.arg)
		}
	case "$currentDate":
		if e.arg.Type == bson.TypeEmbeddedDocument && str(lookup(e.arg.Value, "$type")) == "timestamp" {
			setVal(vTimestamp(uint32(a.opts.Now.Unix()), 1))
		} else {
			setVal(vTime(a.opts.Now))
		}
	case "$bit":
		var v bson.RawValue
		if cur == nil {
			v = vInt32(0)
		} else {
			v = cur.value()
		}
		if v.Type != bson.TypeInt32 && v.Type != bson.TypeInt64 {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply $bit to a value of non-integral type.%s has the field %s of non-integer type %s", a.idString(), t.key, typeName(v.Type))
		}
		for _, b := range e.bitOps {
			x, y := asInt64(v), asInt64(b.v)
			var r int64
			switch b.name {
			case "and":
				r = x & y
			case "or":
				r = x | y
			default:
				r = x ^ y
			}
			if v.Type == bson.TypeInt32 && b.v.Type == bson.TypeInt32 {
				v = vInt32(int32(r))
			} else {
				v = vInt64(r)
			}
		}
		setVal(v)
	case "$push", "$addToSet":
		if cur == nil {
			cur = &mnode{open: true, isArr: true}
			t.parent.set(t.key, cur)
		} else if cur.typ() != bson.TypeArray {
			if e.op == "$addToSet" {
				return mongoerr.New(mongoerr.BadValue, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", t.key, typeName(cur.typ()))
			}
			return mongoerr.New(mongoerr.BadValue, "The field '%s' must be an array but is of type %s in document %s", t.path, typeName(cur.typ()), a.idString())
		}
		elems := cur.elems()
		if e.op == "$push" {
			elems = e.push.apply(elems)
		} else {
			for _, v := range e.each {
				if !slices.ContainsFunc(elems, func(x bson.RawValue) bool { return Equal(x, v) }) {
					elems = append(elems, v)
				}
			}
		}
		cur.setElems(elems)
	case "$pop":
		if cur == nil {
			return nil
		}
		if cur.typ() != bson.TypeArray {
			return mongoerr.New(mongoerr.TypeMismatch, "Path '%s' contains an element of non-array type '%s'", t.path, typeName(cur.typ()))
		}
		elems := cur.elems()
		if len(elems) == 0 {
			return nil
		}
		if asFloat(e.arg) > 0 {
			elems = elems[:len(elems)-1]
		} else {
			elems = elems[1:]
		}
		cur.setElems(elems)
	case "$pull", "$pullAll":
		if cur == nil {
			return nil
		}
		if cur.typ() != bson.TypeArray {
			return mongoerr.New(mongoerr.BadValue, "Cannot apply $pull to a non-array value")
		}
		elems := cur.elems()
		kept := elems[:0:0]
		for _, x := range elems {
			if !e.pulls(x) {
				kept = append(kept, x)
			}
		}
		if len(kept) != len(elems) {
			cur.setElems(kept)
		}
	}
	return nil
}

// pulls reports whether $pull/$pullAll removes element x.
func (e *updateEntry) pulls(x bson.RawValue) bool {
	switch {
	case e.op == "$pullAll":
		return slices.ContainsFunc(e.each, func(v bson.RawValue) bool { return Equal(x, v) })
	case e.pullEq:
		return Equal(x, e.arg)
	case e.pullWrap:
		return e.pull.match(wrapValue(x), nil)
	}
	return x.Type == bson.TypeEmbeddedDocument && e.pull.match(x.Value, nil)
}

func (p *pushSpec) apply(elems []bson.RawValue) []bson.RawValue {
	pos := int64(len(elems))
	if p.position != nil {
		pos = *p.position
		if pos < 0 {
			pos = max(int64(len(elems))+pos, 0)
		}
		pos = min(pos, int64(len(elems)))
	}
	out := make([]bson.RawValue, 0, len(elems)+len(p.each))
	out = append(out, elems[:pos]...)
	out = append(out, p.each...)
	out = append(out, elems[pos:]...)
	switch {
	case p.sortDir != 0:
		slices.SortStableFunc(out, func(a, b bson.RawValue) int { return p.sortDir * Compare(a, b) })
	case p.sort != nil:
		slices.SortStableFunc(out, func(a, b bson.RawValue) int {
			return p.sort.Compare(docOrEmpty(a), docOrEmpty(b))
		})
	}
	if p.slice != nil {
		n := *p.slice
		switch {
		case n >= 0 && n < int64(len(out)):
			out = out[:n]
		case n < 0 && -n < int64(len(out)):
			out = out[int64(len(out))+n:]
		}
	}
	return out
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

func docOrEmpty(v bson.RawValue) bson.Raw {
	if v.Type == bson.TypeEmbeddedDocument {
		return v.Value
	}
	return emptyDoc
}

func (a *applier) rename(e *updateEntry) error {
	id := "_id: " + shortString(lookup(a.doc, "_id"))
	// Find the source; a path through an array is refused, one through a
	// scalar is not viable, a missing one makes the rename a no-op.
	n := a.root
	for i, c := range e.path {
		switch n.typ() {
		case bson.TypeArray:
			return mongoerr.New(mongoerr.BadValue, "The source field cannot be an array element, '%s' in doc with %s has an array field called '%s'", e.dotted, id, e.path[i-1])
		case bson.TypeEmbeddedDocument:
		default:
			return mongoerr.New(mongoerr.PathNotViable, "cannot use the part (%s of %s) to traverse the element ({%s: %s})", c, e.dotted, e.path[i-1], shortString(n.value()))
		}
		if i == len(e.path)-1 {
			break
		}
		next := n.child(c)
		if next == nil {
			return nil
		}
		n = next
	}
	src := n.child(e.path[len(e.path)-1])
	if src == nil {
		return nil
	}
	v := src.value()
	// The destination must not run through an array either.
	d := a.root
	for _, c := range e.to[:len(e.to)-1] {
		next := d.child(c)
		if next == nil {
			break
		}
		if next.typ() == bson.TypeArray {
			return mongoerr.New(mongoerr.BadValue, "The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'", e.toDotted, id, c)
		}
		if next.typ() != bson.TypeEmbeddedDocument {
			break
		}
		d = next
	}
	if e.path[0] == "_id" && lookup(a.doc, "_id").Type != 0 {
		return mongoerr.New(mongoerr.ImmutableField, "Unsetting the path '%s' using $rename would modify the immutable field '_id'", e.dotted)
	}
	n.remove(e.path[len(e.path)-1])
	targets, err := a.resolve(a.root, e.to, "", true, nil)
	if err != nil {
		return err
	}
	for _, t := range targets {
		t.parent.set(t.key, rawNode(v))
	}
	return nil
}

// safeNumString renders a number as MongoDB's SafeNum debug string.
func safeNumString(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32:
		return "(NumberInt)" + strconv.FormatInt(asInt64(v), 10)
	case bson.TypeInt64:
		return "(NumberLong)" + strconv.FormatInt(asInt64(v), 10)
	case bson.TypeDouble:
		return "(NumberDouble)" + strconv.FormatFloat(asFloat(v), 'g', -1, 64)
	}
	return "(NumberDecimal)" + v.Decimal128().String()
}
