package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Column layouts (Config.Columns).
const (
	ColumnsAuto     = "auto"     // typed columns from the documents' fields
	ColumnsDocument = "document" // one jsonb column, doc
)

// DefaultFlattenDepth is how deep fields of nested objects become columns
// of their own (address.city → address__city).
const DefaultFlattenDepth = 1

// maxColumns is PostgreSQL's limit on the columns of a table, dropped
// ones included.
const maxColumns = 1600

// overflowColumn holds, per row, the values that have no typed column:
// drift that could not widen, fields past the column cap, explicit nulls,
// and values no column type can hold.
const overflowColumn = "_tide_overflow"

// typedSystem are a typed mirror's own columns besides _id and
// _tide_overflow; a field of one of these names gets another.
var typedSystem = []column{
	{"_tide_op", "text"},
	{"_tide_cluster_time", "bigint"},
	{"_tide_deleted", "boolean"},
	{"_tide_synced_at", "timestamp with time zone"},
}

// tcol is a typed column: the field path it holds and what kind of value.
type tcol struct {
	name   string
	path   []string
	kind   kind
	pin    *pin // from column_types; a pinned column never widens
	bson   string
	nameOf string // the path joined, when a collision gave it another name
	idx    int    // position in layout.cols
	seen   uint64 // the BSON types seen fitting in it (typeBit), each recorded once in tide_columns
}

// typeBit is the bit of a value's BSON type in tcol.seen, a UUID apart
// from other binary.
func typeBit(v bsoncore.Value) uint64 { return typeBitOf(typeName(v)) }

// typeBitOf is typeBit of a type's name, as tide_columns records it.
func typeBitOf(name string) uint64 {
	switch name {
	case "uuid":
		return 1 << 61
	case "minKey":
		return 1 << 62
	case "maxKey":
		return 1 << 63
	}
	for t, alias := range typeAliases {
		if alias == name {
			return 1 << t
		}
	}
	return 1 << 60 // a type without a name
}

// layout is a typed table's columns, in the order they were added.
type layout struct {
	key     kind // of _id
	keyBSON string
	cols    []*tcol
	byPath  map[string]*tcol // pathKey(path) -> column
	byName  map[string]*tcol
	taken   map[string]bool // names in the table besides the ones in byName (system, foreign columns)
	attnums int             // columns PostgreSQL counts against its limit, dropped ones included
}

func newLayout(key kind, keyBSON string) *layout {
	l := &layout{key: key, keyBSON: keyBSON, byPath: map[string]*tcol{}, byName: map[string]*tcol{}, taken: map[string]bool{}}
	l.taken["_id"], l.taken[overflowColumn] = true, true
	for _, c := range typedSystem {
		l.taken[c.name] = true
	}
	l.attnums = 2 + len(typedSystem)
	return l
}

// clone returns a copy that may change without touching l.
func (l *layout) clone() *layout {
	c := *l
	c.cols = make([]*tcol, len(l.cols))
	c.byPath = make(map[string]*tcol, len(l.byPath))
	c.byName = make(map[string]*tcol, len(l.byName))
	for i, col := range l.cols {
		cc := *col
		c.cols[i] = &cc
		c.byPath[pathKey(cc.path)] = &cc
		c.byName[cc.name] = &cc
	}
	c.taken = maps.Clone(l.taken)
	return &c
}

// pathKey is a map key for a field path; NUL cannot occur in a BSON key.
func pathKey(path []string) string { return strings.Join(path, "\x00") }

// full reports whether the table has no room for another column.
func (l *layout) full() bool { return l.attnums >= maxColumns }

// nameFor returns the column name of a new field path: its parts joined
// by "__", cut to 63 bytes with a hash as table names are. A name that is
// taken (a.b and a__b both make a__b; a field named like a system column),
// empty, or cut gets the path's own hash, so the first path to claim a
// name keeps it and the others get distinct names, the same on every
// run given the same order of first appearance.
func (l *layout) nameFor(path []string) string {
	joined := strings.Join(path, "__")
	name := shorten(joined)
	if name != "" && utf8.ValidString(joined) && !l.taken[name] && l.byName[name] == nil {
		return name
	}
	joined = strings.ToValidUTF8(joined, "_") // an identifier must be UTF-8; the hash keeps it apart
	sum := sha256.Sum256([]byte(pathKey(path)))
	for i := 0; ; i++ {
		suffix := "_" + hex.EncodeToString(sum[:4])
		if i > 0 {
			suffix += "_" + hex.EncodeToString([]byte{byte(i)})
		}
		cand := joined
		if len(cand)+len(suffix) > maxIdentifier {
			cand = shorten(cand)[:maxIdentifier-len(suffix)]
			for len(cand) > 0 && !validCut(cand) {
				cand = cand[:len(cand)-1]
			}
		}
		cand += suffix
		if !l.taken[cand] && l.byName[cand] == nil {
			return cand
		}
	}
}

// validCut reports whether s does not end inside a UTF-8 sequence.
func validCut(s string) bool {
	for i := len(s) - 1; i >= 0 && i >= len(s)-4; i-- {
		c := s[i]
		if c < 0x80 {
			return true
		}
		if c >= 0xC0 { // a start byte: complete if the sequence fits
			need := 2
			switch {
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			}
			return len(s)-i == need
		}
	}
	return true
}

// add adds a column for path, of kind k (or as pinned), and returns it.
func (l *layout) add(path []string, k kind, p *pin, bsonType string) *tcol {
	c := &tcol{path: append([]string(nil), path...), kind: k, pin: p, bson: bsonType, idx: len(l.cols)}
	if p != nil {
		c.kind = p.kind
	}
	c.name = l.nameFor(path)
	if c.name != strings.Join(path, "__") {
		c.nameOf = strings.Join(path, ".")
	}
	l.cols = append(l.cols, c)
	l.byPath[pathKey(c.path)] = c
	l.byName[c.name] = c
	l.attnums++
	return c
}

// sqlType is the column's type in DDL.
func (c *tcol) sqlType() string {
	if c.pin != nil {
		return c.pin.typ
	}
	return c.kind.pgType()
}

// field is one value of a document at a column's depth.
type field struct {
	key   []byte // the path's parts joined by NUL: pathKey, without allocating
	parts [][]byte
	value bsoncore.Value
	empty bool // an object at a flattened depth with no fields: {} in _tide_overflow
}

// path returns the field's path, allocated: for the rarer uses (a new
// column, an overflowed value).
func (f *field) path() []string {
	p := make([]string, len(f.parts))
	for i, b := range f.parts {
		p[i] = string(b)
	}
	return p
}

// fieldWalker walks documents field by field, reusing its buffers.
type fieldWalker struct {
	parts [][]byte
	key   []byte
	f     field // what fn gets, reused: a field per call would be allocated
}

// walk calls fn for each field of doc down to depth levels of nested
// objects, in document order, skipping the top-level _id if skipID (a
// mirror's key column holds it). What fn gets is valid during the call.
func (w *fieldWalker) walk(doc bsoncore.Document, depth int, skipID bool, fn func(f *field)) {
	w.parts, w.key = w.parts[:0], w.key[:0]
	w.walkDoc(doc, depth, skipID, fn)
}

func (w *fieldWalker) walkDoc(doc bsoncore.Document, depth int, skipID bool, fn func(f *field)) {
	if len(doc) < 5 {
		return
	}
	rest := doc[4 : len(doc)-1]
	for len(rest) > 0 {
		el, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return
		}
		rest = next
		name := el.KeyBytes()
		if skipID && string(name) == "_id" {
			continue
		}
		v := el.Value()
		keyLen := len(w.key)
		if len(w.parts) > 0 {
			w.key = append(w.key, 0)
		}
		w.key = append(w.key, name...)
		w.parts = append(w.parts, name)
		if sub, ok := v.DocumentOK(); ok && depth > 0 {
			if len(sub) <= 5 {
				w.f = field{key: w.key, parts: w.parts, value: v, empty: true}
				fn(&w.f)
			} else {
				w.walkDoc(sub, depth-1, false, fn)
			}
		} else {
			w.f = field{key: w.key, parts: w.parts, value: v}
			fn(&w.f)
		}
		w.parts = w.parts[:len(w.parts)-1]
		w.key = w.key[:keyLen]
	}
}

// keyKind returns the kind of the _id column a document key makes: the
// _id value's natural type where it is a bigint, text, ObjectId or uuid,
// else jsonb. A compound key (a sharded collection's) is jsonb.
func keyKind(key bsoncore.Document) (kind, string) {
	v, ok := soleID(key)
	if !ok {
		return kJSON, "object"
	}
	switch k := natural(v); k {
	case kInt32, kInt64:
		return kInt64, typeName(v)
	case kText, kOID, kUUID:
		return k, typeName(v)
	}
	return kJSON, typeName(v)
}

// soleID returns the _id of a key with no other field.
func soleID(key bsoncore.Document) (bsoncore.Value, bool) {
	if len(key) < 5 {
		return bsoncore.Value{}, false
	}
	el, rest, ok := bsoncore.ReadElement(key[4 : len(key)-1])
	if !ok || len(rest) != 0 || string(el.KeyBytes()) != "_id" {
		return bsoncore.Value{}, false
	}
	return el.Value(), true
}

// keyFits reports whether a document key can be written to an _id
// column of kind k.
func keyFits(k kind, key bsoncore.Document) bool {
	if k == kJSON {
		return true
	}
	v, ok := soleID(key)
	if !ok {
		return false
	}
	if k == kInt64 {
		return v.Type == bsoncore.TypeInt32 || v.Type == bsoncore.TypeInt64
	}
	return fits(k, nil, v)
}
