package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/mongowire/internal/fts"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

var (
	nullValue      = bson.RawValue{Type: bson.TypeNull}
	undefinedValue = bson.RawValue{Type: bson.TypeUndefined}
)

// index is one index of a collection: an ordered tree of the key values of
// every document (one entry per array element for a multikey index).
type index struct {
	spec    IndexSpec
	paths   [][]string
	dirs    []int
	partial *mql.Filter // partialFilterExpression: only matching documents are indexed
	// partialClauses are the conjuncts of the partial filter, for
	// deciding which queries the index answers; partialOK is false when
	// the filter holds something else.
	partialClauses []clause
	partialOK      bool
	tree           *tree
	// multikey is set once a document had an array on an indexed path;
	// range bounds are then not intersected, since different elements may
	// satisfy different bounds.
	multikey bool
	// coll is the index's collation (nil: simple): its string keys are
	// collation keys, so only queries with the same collation may use it
	// for strings, and a unique index treats collation-equal strings as
	// duplicates.
	coll *mql.Collation
	// text is set on a text index (fts): it holds no entries and serves
	// no ordinary predicate or sort, only $text queries (text.go).
	text *fts.Spec
	// hashed is set on a single-field hashed index (hashed.go): its keys
	// are mongod's hashes of the values, for equality and $in.
	hashed bool
}

func newIndex(spec IndexSpec) (*index, error) {
	ix := &index{spec: spec}
	if len(spec.Key) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "index %q: key pattern must not be empty", spec.Name)
	}
	if fts.IsTextKey(spec.Key) {
		t, err := fts.SpecOf(spec.Options)
		if err != nil {
			return nil, err
		}
		ix.text = t
	}
	for _, e := range spec.Key {
		if e.Key == "" {
			return nil, mongoerr.New(mongoerr.BadValue, "index %q: empty field name in key pattern", spec.Name)
		}
		if ix.text != nil && (e.Key == "_fts" || e.Key == "_ftsx") {
			ix.paths = append(ix.paths, []string{e.Key})
			ix.dirs = append(ix.dirs, 1)
			continue
		}
		if s, ok := fts.KeyString(e.Value); ok && s == "hashed" {
			switch {
			case len(spec.Key) != 1:
				return nil, mongoerr.New(mongoerr.CommandNotSupported, "index %q: compound hashed indexes are not supported by this server (a single hashed field is)", spec.Name)
			case spec.Unique:
				return nil, mongoerr.New(mongoerr.CannotCreateIndex, "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.")
			case lookupD(spec.Options, "collation") != nil:
				return nil, mongoerr.New(mongoerr.CommandNotSupported, "index %q: a hashed index with a collation is not supported by this server", spec.Name)
			}
			ix.hashed = true
			ix.paths = append(ix.paths, strings.Split(e.Key, "."))
			ix.dirs = append(ix.dirs, 1)
			continue
		}
		dir, err := keyDirection(e.Value)
		if err != nil {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "index %q on %q: %v", spec.Name, e.Key, err)
		}
		ix.paths = append(ix.paths, strings.Split(e.Key, "."))
		ix.dirs = append(ix.dirs, dir)
	}
	for _, o := range spec.Options {
		if o.Key == "collation" {
			c, err := parseCollationOption(o.Value)
			if err != nil {
				return nil, err
			}
			ix.coll = c
			continue
		}
		if o.Key != "partialFilterExpression" {
			continue
		}
		var raw bson.Raw
		switch v := o.Value.(type) {
		case bson.Raw:
			raw = v
		case bson.RawValue:
			raw, _ = v.DocumentOK()
		case bson.D, bson.M:
			raw, _ = bson.Marshal(v)
		}
		if raw == nil {
			return nil, mongoerr.New(mongoerr.TypeMismatch, "index %q: partialFilterExpression must be a document", spec.Name)
		}
		f, err := mql.CompileFilter(raw)
		if err != nil {
			return nil, err
		}
		ix.partial = f
		ix.partialClauses, ix.partialOK = partialClauses(raw)
	}
	ix.tree = newTree(ix.compare)
	return ix, nil
}

// keyDirection reads a key pattern value: a positive number is ascending, a
// negative one descending; special index types are refused.
func keyDirection(v any) (int, error) {
	var f float64
	switch x := v.(type) {
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case float64:
		f = x
	case int:
		f = float64(x)
	case string:
		return 0, fmt.Errorf("index type %q is not supported", x)
	case bson.RawValue:
		switch x.Type {
		case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
			f = x.AsFloat64()
		case bson.TypeString:
			return 0, fmt.Errorf("index type %q is not supported", x.StringValue())
		default:
			return 0, fmt.Errorf("bad index key pattern value %v", x)
		}
	default:
		return 0, fmt.Errorf("bad index key pattern value %v", v)
	}
	switch {
	case f > 0:
		return 1, nil
	case f < 0:
		return -1, nil
	}
	return 0, fmt.Errorf("bad index key pattern value 0")
}

// compare orders entries by key (each field in its direction) then record id.
// A probe may carry fewer key values than the index has fields: its missing
// values sort before every value when its rid is 0, after every value
// otherwise, so a probe with one value bounds all entries with that prefix.
func (ix *index) compare(a, b *entry) int {
	if len(ix.dirs) == 1 && a.k0.Type != 0 && b.k0.Type != 0 { // single field: the common case
		if c := compareValues(a.k0, b.k0); c != 0 {
			return c * ix.dirs[0]
		}
		return cmpRID(a.rid, b.rid)
	}
	for i := range ix.dirs {
		av, aok := entryKey(a, i)
		bv, bok := entryKey(b, i)
		switch {
		case !aok && !bok:
			return cmpRID(a.rid, b.rid)
		case !aok:
			if a.rid == 0 {
				return -1
			}
			return 1
		case !bok:
			if b.rid == 0 {
				return 1
			}
			return -1
		}
		if c := compareValues(av, bv); c != 0 {
			return c * ix.dirs[i]
		}
	}
	return cmpRID(a.rid, b.rid)
}

// compareValues is mql.Compare with fast paths for the common key types
// when both sides have the same type.
func compareValues(a, b bson.RawValue) int {
	if a.Type == b.Type {
		switch a.Type {
		case bson.TypeInt32:
			if len(a.Value) == 4 && len(b.Value) == 4 {
				return cmpInt(int64(int32(binary.LittleEndian.Uint32(a.Value))), int64(int32(binary.LittleEndian.Uint32(b.Value))))
			}
		case bson.TypeInt64:
			if len(a.Value) == 8 && len(b.Value) == 8 {
				return cmpInt(int64(binary.LittleEndian.Uint64(a.Value)), int64(binary.LittleEndian.Uint64(b.Value)))
			}
		case bson.TypeObjectID:
			return bytes.Compare(a.Value, b.Value)
		case bson.TypeString:
			if len(a.Value) >= 5 && len(b.Value) >= 5 {
				return bytes.Compare(a.Value[4:len(a.Value)-1], b.Value[4:len(b.Value)-1])
			}
		}
	}
	return mql.Compare(a, b)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func entryKey(e *entry, i int) (bson.RawValue, bool) {
	if i == 0 {
		return e.k0, e.k0.Type != 0
	}
	if e.rest != nil && i-1 < len(*e.rest) {
		return (*e.rest)[i-1], true
	}
	return bson.RawValue{}, false
}

func cmpRID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keys returns the entries doc contributes to the index (none for a sparse
// index when doc has none of the fields, or when doc is outside a partial
// index's filter). Arrays yield one entry per element; two array-valued
// fields in one compound key are refused as MongoDB refuses them.
func (ix *index) keys(doc bson.Raw, rid uint64) ([]entry, error) {
	if ix.partial != nil && !ix.partial.Match(doc) {
		return nil, nil
	}
	if ix.text != nil {
		return nil, ix.text.CheckDocument(doc) // a language mongod could not index refuses the write
	}
	per := make([][]bson.RawValue, len(ix.paths))
	found := false
	multiField := -1
	for i, p := range ix.paths {
		vals, ok, multi := pathValues(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}, p, nil)
		found = found || ok
		ix.multikey = ix.multikey || multi
		if len(vals) == 0 {
			vals = []bson.RawValue{nullValue}
		}
		if ix.coll != nil {
			for j := range vals {
				vals[j] = ix.coll.Transform(vals[j])
			}
		}
		if ix.hashed {
			if multi {
				return nil, hashedKeyError(ix.spec.Key[i].Key)
			}
			for j := range vals {
				vals[j] = hashKey(vals[j])
			}
		}
		vals = dedupeValues(vals)
		if len(vals) > 1 {
			if multiField >= 0 {
				return nil, mongoerr.New(mongoerr.CannotIndexParallelArrays, "cannot index parallel arrays [%s] [%s]",
					ix.spec.Key[i].Key, ix.spec.Key[multiField].Key)
			}
			multiField = i
		}
		per[i] = vals
	}
	if ix.spec.Sparse && !found {
		return nil, nil
	}
	n := 1
	for _, vals := range per {
		n *= len(vals)
	}
	out := make([]entry, 0, n)
	if len(per) == 1 {
		for _, v := range per[0] {
			out = append(out, entry{k0: v, rid: rid})
		}
		return out, nil
	}
	// At most one field has several values, so the product is a line.
	for j := 0; j < n; j++ {
		rest := make([]bson.RawValue, len(per)-1)
		e := entry{rid: rid, rest: &rest}
		for i, vals := range per {
			v := vals[0]
			if len(vals) > 1 {
				v = vals[j]
			}
			if i == 0 {
				e.k0 = v
			} else {
				rest[i-1] = v
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// pathValues collects the values at path inside v, descending into arrays
// the way MongoDB's index key generator does. ok reports whether the path
// exists anywhere; multi whether an array was expanded.
func pathValues(v bson.RawValue, path []string, out []bson.RawValue) (_ []bson.RawValue, ok, multi bool) {
	if len(path) == 0 {
		if v.Type == bson.TypeArray {
			vals, _ := v.Array().Values()
			if len(vals) == 0 {
				return append(out, undefinedValue), true, true
			}
			return append(out, vals...), true, true
		}
		return append(out, v), true, false
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		f, err := v.Document().LookupErr(path[0])
		if err != nil {
			return out, false, false
		}
		return pathValues(f, path[1:], out)
	case bson.TypeArray:
		arr := v.Array()
		if n, err := strconv.Atoi(path[0]); err == nil {
			if f, err := arr.IndexErr(uint(n)); err == nil {
				return pathValues(f, path[1:], out)
			}
			return out, false, false
		}
		vals, _ := arr.Values()
		found := false
		for _, el := range vals {
			if el.Type != bson.TypeEmbeddedDocument {
				continue
			}
			var ok bool
			n := len(out)
			out, ok, _ = pathValues(el, path, out)
			if !ok {
				out = append(out[:n], nullValue)
			}
			found = found || ok
		}
		return out, found, true
	}
	return out, false, false
}

// dedupeValues sorts vals in MongoDB order and removes equal values.
func dedupeValues(vals []bson.RawValue) []bson.RawValue {
	if len(vals) < 2 {
		return vals
	}
	sort.SliceStable(vals, func(i, j int) bool { return mql.Compare(vals[i], vals[j]) < 0 })
	out := vals[:1]
	for _, v := range vals[1:] {
		if mql.Compare(out[len(out)-1], v) != 0 {
			out = append(out, v)
		}
	}
	return out
}

func (ix *index) unique() bool { return ix.spec.Unique }

// conflict returns the rid of another record holding key e in a unique
// index, or 0.
func (ix *index) conflict(e *entry, self uint64) uint64 {
	var other uint64
	probe := entry{k0: e.k0, rest: e.rest, rid: 0}
	ix.tree.ascend(&probe, func(x *entry) bool {
		if ix.compareKeys(x, e) != 0 {
			return false
		}
		if x.rid != self {
			other = x.rid
			return false
		}
		return true
	})
	return other
}

// compareKeys compares the key values only.
func (ix *index) compareKeys(a, b *entry) int {
	for i := range ix.dirs {
		av, _ := entryKey(a, i)
		bv, _ := entryKey(b, i)
		if c := compareValues(av, bv); c != 0 {
			return c
		}
	}
	return 0
}

// dupKeyError shapes a unique violation the way MongoDB does.
func (ix *index) dupKeyError(ns Namespace, e *entry) *mongoerr.Error {
	var shown []string
	keyValue := bson.D{}
	for i, k := range ix.spec.Key {
		v, _ := entryKey(e, i)
		if ix.coll != nil && v.Type == bson.TypeString {
			// A collation key is bytes, not text: shown in hex, as the
			// index holds it and not as any document spells it.
			v = bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, fmt.Sprintf("%x", v.Value[4:len(v.Value)-1]))}
		}
		shown = append(shown, k.Key+": "+formatKeyValue(v))
		keyValue = append(keyValue, bson.E{Key: k.Key, Value: v})
	}
	err := mongoerr.New(mongoerr.DuplicateKey, "E11000 duplicate key error collection: %s index: %s dup key: { %s }",
		ns, ix.spec.Name, strings.Join(shown, ", "))
	err.Info = bson.D{{Key: "keyPattern", Value: ix.spec.Key}, {Key: "keyValue", Value: keyValue}}
	if ix.coll != nil {
		err.Info = append(err.Info, bson.E{Key: "collation", Value: ix.coll.Spec()})
	}
	return err
}

// formatKeyValue prints a value as MongoDB prints it in a duplicate key
// message.
func formatKeyValue(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32:
		return strconv.FormatInt(int64(v.Int32()), 10)
	case bson.TypeInt64:
		return strconv.FormatInt(v.Int64(), 10)
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case bson.TypeString:
		return strconv.Quote(v.StringValue())
	case bson.TypeObjectID:
		return "ObjectId('" + v.ObjectID().Hex() + "')"
	case bson.TypeNull:
		return "null"
	case bson.TypeUndefined:
		return "undefined"
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean())
	}
	return v.String()
}

// IndexName returns MongoDB's default name for a key pattern: "a_1_b_-1".
func IndexName(key bson.D) string {
	var parts []string
	for _, e := range key {
		v := fmt.Sprint(e.Value)
		if rv, ok := e.Value.(bson.RawValue); ok {
			switch rv.Type {
			case bson.TypeString:
				v = rv.StringValue()
			case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
				v = strconv.FormatFloat(rv.AsFloat64(), 'g', -1, 64)
			}
		}
		parts = append(parts, e.Key+"_"+v)
	}
	return strings.Join(parts, "_")
}

// parseCollationOption parses a collation given as an option of create or
// of an index, in any of the shapes options arrive in.
func parseCollationOption(v any) (*mql.Collation, error) {
	var raw bson.Raw
	switch x := v.(type) {
	case bson.RawValue:
		if x.Type != bson.TypeEmbeddedDocument {
			return mql.ParseCollation(x)
		}
		raw = x.Value
	case bson.Raw:
		raw = x
	case bson.D, bson.M:
		raw, _ = bson.Marshal(x)
	default:
		return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collation' is the wrong type, expected type 'object'")
	}
	return mql.ParseCollation(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
}

// withCollation returns options with their collation option replaced by
// c's full specification (as mongod reports it), or removed when c is
// nil (simple).
func withCollation(options bson.D, c *mql.Collation) bson.D {
	if c == nil && lookupD(options, "collation") == nil {
		return options
	}
	out := make(bson.D, 0, len(options)+1)
	seen := false
	for _, o := range options {
		if o.Key != "collation" {
			out = append(out, o)
			continue
		}
		seen = true
		if c != nil {
			out = append(out, bson.E{Key: "collation", Value: c.Spec()})
		}
	}
	if !seen && c != nil {
		out = append(out, bson.E{Key: "collation", Value: c.Spec()})
	}
	return out
}
