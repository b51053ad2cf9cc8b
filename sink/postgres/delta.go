package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/encode"
)

// An update applied from its update description (Config.PartialUpdates)
// is one UPDATE of its row, sent after the batch's set-based upserts and
// deletes, in event order. Its edits inside jsonb values go through
// these session functions: jsonb_set alone neither creates missing
// parents nor pads an array as MongoDB does.
const deltaFunctions = `CREATE OR REPLACE FUNCTION pg_temp.tide_set(j jsonb, p text[], v jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE k text;
BEGIN
	IF cardinality(p) = 0 THEN RETURN v; END IF;
	k := p[1];
	IF jsonb_typeof(j) = 'array' AND k ~ '^[0-9]{1,9}$' THEN
		WHILE jsonb_array_length(j) < k::int LOOP j := j || 'null'::jsonb; END LOOP;
		RETURN jsonb_set(j, ARRAY[k], pg_temp.tide_set(j -> k::int, p[2:], v), true);
	END IF;
	IF jsonb_typeof(j) IS DISTINCT FROM 'object' THEN j := '{}'; END IF;
	RETURN jsonb_set(j, ARRAY[k], pg_temp.tide_set(j -> k, p[2:], v), true);
END $$;
CREATE OR REPLACE FUNCTION pg_temp.tide_unset(j jsonb, p text[], parents boolean) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb;
BEGIN
	IF j IS NULL OR cardinality(p) = 0 THEN RETURN j; END IF;
	FOR i IN 1 .. cardinality(p) - 1 LOOP
		v := j #> p[1:i];
		IF v IS NULL THEN RETURN j; END IF;
		IF jsonb_typeof(v) NOT IN ('object', 'array') OR v = '{}' THEN
			IF parents THEN j := j #- p[1:i]; END IF;
			RETURN j;
		END IF;
	END LOOP;
	j := j #- p;
	IF parents THEN
		FOR i IN REVERSE cardinality(p) - 1 .. 1 LOOP
			IF j #> p[1:i] = '{}' THEN j := j #- p[1:i]; END IF;
		END LOOP;
	END IF;
	RETURN j;
END $$;
CREATE OR REPLACE FUNCTION pg_temp.tide_truncate(j jsonb, p text[], n int) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE a jsonb := j #> p;
BEGIN
	IF jsonb_typeof(a) IS DISTINCT FROM 'array' THEN RETURN j; END IF;
	a := (SELECT coalesce(jsonb_agg(e ORDER BY o), '[]') FROM jsonb_array_elements(a) WITH ORDINALITY AS x(e, o) WHERE o <= n);
	IF cardinality(p) = 0 THEN RETURN a; END IF;
	RETURN jsonb_set(j, p, a);
END $$`

// deltaOp is one change of an update description.
type deltaOp struct {
	what  byte // 't' truncate, 'u' unset, 's' set: the order they apply in
	path  []string
	value bsoncore.Value // 's'
	size  int32          // 't'
}

// parseDelta reads an update description: truncatedArrays, then
// removedFields, then updatedFields, which is the order MongoDB applies
// them in. disambiguatedPaths, where present, splits a path whose field
// names hold dots.
func parseDelta(desc bsoncore.Document) ([]deltaOp, error) {
	var ops []deltaOp
	paths := map[string][]string{}
	if v, err := desc.LookupErr("disambiguatedPaths"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errors.New("disambiguatedPaths is not a document")
		}
		els, _ := d.Elements()
		for _, el := range els {
			arr, ok := el.Value().ArrayOK()
			if !ok {
				return nil, fmt.Errorf("disambiguatedPaths.%s is not an array", el.Key())
			}
			vals, _ := arr.Values()
			var p []string
			for _, part := range vals {
				switch part.Type {
				case bsoncore.TypeString:
					p = append(p, part.StringValue())
				case bsoncore.TypeInt32, bsoncore.TypeInt64:
					n, _ := part.AsInt64OK()
					p = append(p, strconv.FormatInt(n, 10))
				default:
					return nil, fmt.Errorf("disambiguatedPaths.%s holds a %s", el.Key(), part.Type)
				}
			}
			paths[el.Key()] = p
		}
	}
	split := func(s string) []string {
		if p, ok := paths[s]; ok {
			return p
		}
		return strings.Split(s, ".")
	}
	if v, err := desc.LookupErr("truncatedArrays"); err == nil && v.Type != bsoncore.TypeNull {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, errors.New("truncatedArrays is not an array")
		}
		vals, _ := arr.Values()
		for _, t := range vals {
			d, ok := t.DocumentOK()
			if !ok {
				return nil, errors.New("truncatedArrays holds a non-document")
			}
			f, ok := d.Lookup("field").StringValueOK()
			n, ok2 := d.Lookup("newSize").AsInt64OK()
			if !ok || !ok2 || n < 0 || n > 1<<31-1 {
				return nil, errors.New("truncatedArrays holds an entry without field and newSize")
			}
			ops = append(ops, deltaOp{what: 't', path: split(f), size: int32(n)})
		}
	}
	if v, err := desc.LookupErr("removedFields"); err == nil && v.Type != bsoncore.TypeNull {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, errors.New("removedFields is not an array")
		}
		vals, _ := arr.Values()
		for _, f := range vals {
			s, ok := f.StringValueOK()
			if !ok {
				return nil, errors.New("removedFields holds a non-string")
			}
			ops = append(ops, deltaOp{what: 'u', path: split(s)})
		}
	}
	if v, err := desc.LookupErr("updatedFields"); err == nil && v.Type != bsoncore.TypeNull {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errors.New("updatedFields is not a document")
		}
		els, err := d.Elements()
		if err != nil {
			return nil, fmt.Errorf("updatedFields: %w", err)
		}
		for _, el := range els {
			ops = append(ops, deltaOp{what: 's', path: split(el.Key()), value: el.Value()})
		}
	}
	return ops, nil
}

// isIndex reports whether a path part is an array index.
func isIndex(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// deltaTarget says where path p of a document lives in a typed table
// flattened depth levels deep. flat: p is at a flattened level, and its
// value becomes columns as an insert's would. Otherwise p is inside the
// jsonb value of the field at p[:len(p)-len(rest)], whose column is col
// (nil if there is none yet): p is deeper than the flattening, or a part
// of it is a number below a jsonb column, which is read as an array
// index (tags.3). Such a path may also be an object's field (a row
// whose tags is an object {"3": ...}, flattened): either says so, and
// the row decides, by whether its value of col is NULL.
func (l *layout) deltaTarget(p []string, depth int) (col *tcol, rest []string, flat, either bool) {
	for i := 1; i < len(p); i++ {
		c := l.byPath[pathKey(p[:i])]
		if i-1 == depth {
			return c, p[i:], false, false
		}
		if c != nil && c.kind == kJSON && isIndex(p[i]) {
			return c, p[i:], false, len(p)-1 <= depth
		}
	}
	return nil, nil, true, false
}

// nestedDoc returns {p[0]: {p[1]: ... {p[n-1]: v}}}, which walks as a
// document with the field p.
func nestedDoc(p []string, v bsoncore.Value) bsoncore.Document {
	doc := bsoncore.NewDocumentBuilder().AppendValue(p[len(p)-1], v).Build()
	for i := len(p) - 2; i >= 0; i-- {
		doc = bsoncore.NewDocumentBuilder().AppendDocument(p[i], doc).Build()
	}
	return doc
}

// planDelta plans the columns an update description of a row of tb
// needs, as plan does for a full document: its fields at flattened
// levels add, widen or record columns; an edit inside a jsonb value
// whose field has no column yet adds one.
func (s *Sink) planDelta(tb *table, desc bsoncore.Document, walker *fieldWalker, ddl []string) []string {
	ops, err := parseDelta(desc)
	if err != nil {
		return ddl // applyDelta reports it
	}
	for _, op := range ops {
		// An ambiguous path (either: tags.3) is planned as an edit inside
		// the jsonb column: the flattened reading, for a row whose field
		// is an object with a field "3", keeps such values in
		// _tide_overflow rather than add a column per array index.
		col, rest, flat, _ := tb.typed.pending.deltaTarget(op.path, s.cfg.FlattenDepth)
		switch {
		case flat && op.what == 's':
			walker.walk(nestedDoc(op.path, op.value), s.cfg.FlattenDepth, true, func(f *field) {
				_, ddl = s.planField(tb, f, ddl)
			})
		case !flat && col == nil && op.what == 's':
			at := op.path[:len(op.path)-len(rest)]
			t, sub := bsoncore.TypeEmbeddedDocument, bsoncore.NewDocumentBuilder().AppendNull(rest[0]).Build()
			if isIndex(rest[0]) {
				t = bsoncore.TypeArray
			}
			walker.walk(nestedDoc(at, bsoncore.Value{Type: t, Data: sub}), s.cfg.FlattenDepth, true, func(f *field) {
				_, ddl = s.planField(tb, f, ddl)
			})
		}
	}
	return ddl
}

// errNoRow is the error of an update without its document whose row
// does not exist, or is deleted.
var errNoRow = errors.New("an update without its full document found no row to change: the document was never copied " +
	"(copy the collection first: source snapshot initial, or tide snapshot) or was deleted; " +
	"with full_document update_lookup the sink writes whole documents and needs no row")

// deltaStmt is the UPDATE of one row from its update description.
type deltaStmt struct {
	sql  string
	args []any
	row  *row
}

// errNeedsDocument marks an update description the sink cannot apply
// without the whole document.
var errNeedsDocument = errors.New("needs the full document")

// deltaSQL returns the UPDATE that applies row r's update description to
// its row of table tb: only the columns (or, in the document layout,
// the paths of doc) it changes are set. The row must exist, must not be
// deleted, and must not hold a later event.
func (s *Sink) deltaSQL(tb *table, r *row) (deltaStmt, error) {
	st := &s.stage
	ops, err := parseDelta(bsoncore.Document(st.bytes(r.data)))
	if err != nil {
		return deltaStmt{}, err
	}
	d := deltaStmt{row: r, args: []any{nil, r.ct, string(r.op)}}
	arg := func(v any) string {
		d.args = append(d.args, v)
		return "$" + strconv.Itoa(len(d.args))
	}
	var buf []byte
	jsonValue := func(v bsoncore.Value) (string, error) {
		at := len(buf)
		var err error
		buf, err = encode.AppendRelaxedValue(buf, bson.Type(v.Type), v.Data)
		if err != nil {
			return "", err
		}
		if hasNUL(buf[at:]) {
			return "", fmt.Errorf("%w: it holds a NUL byte, which jsonb cannot hold", errNeedsDocument)
		}
		return arg(buf[at:len(buf):len(buf)]) + "::jsonb", nil
	}
	var set strings.Builder
	if tb.typed == nil {
		d.args[0] = r.key
		doc := "t.doc"
		for _, op := range ops {
			p := arg(op.path) + "::text[]"
			switch op.what {
			case 't':
				doc = "pg_temp.tide_truncate(" + doc + ", " + p + ", " + strconv.Itoa(int(op.size)) + ")"
			case 'u':
				doc = "pg_temp.tide_unset(" + doc + ", " + p + ", false)"
			case 's':
				v, err := jsonValue(op.value)
				if err != nil {
					return deltaStmt{}, fmt.Errorf("value of %s: %w", strings.Join(op.path, "."), err)
				}
				doc = "pg_temp.tide_set(" + doc + ", " + p + ", " + v + ")"
			}
		}
		set.WriteString("doc = " + doc)
	} else {
		key := bsoncore.Document(st.bytes(r.rawKey))
		k, _, err := keyValue(tb.typed.pending.key, key, nil)
		if err != nil {
			return deltaStmt{}, fmt.Errorf("document key %s: %w", keyText(key), err)
		}
		d.args[0] = k
		if err := s.typedDelta(tb, ops, &set, arg, jsonValue, &buf); err != nil {
			return deltaStmt{}, err
		}
	}
	d.sql = `UPDATE ` + tb.sql.table + ` AS t SET ` + set.String() + `, _tide_op = $3, _tide_cluster_time = $2, _tide_synced_at = now()
	WHERE t._id = $1 AND t._tide_cluster_time <= $2 AND NOT t._tide_deleted`
	return d, nil
}

// typedDelta writes into set the assignments that apply ops to a row of
// the typed table tb, through the layout the batch leaves it with.
func (s *Sink) typedDelta(tb *table, ops []deltaOp, set *strings.Builder, arg func(any) string, jsonValue func(bsoncore.Value) (string, error), buf *[]byte) error {
	ts := tb.typed
	l := ts.pending
	exprs := map[*tcol]string{} // the new value of each column changed
	var order []*tcol
	current := func(c *tcol) string {
		if e, ok := exprs[c]; ok {
			return e
		}
		return "t." + quote(c.name)
	}
	// guard, where not "", is the condition on the row under which the
	// flattened reading of an ambiguous path applies.
	guard := ""
	assign := func(c *tcol, e string) {
		if guard != "" {
			e = "CASE WHEN " + guard + " THEN " + e + " ELSE " + current(c) + " END"
		}
		if _, ok := exprs[c]; !ok {
			order = append(order, c)
		}
		exprs[c] = e
	}
	ov := "coalesce(t." + overflowColumn + ", '{}'::jsonb)"
	ovChanged := false
	// clearFlat empties what a document held at flattened path p: the
	// columns at p and below it, its _tide_overflow entries, and, when
	// p is set, the columns and overflow leaves of its parents, which
	// are objects now.
	clearFlat := func(p []string, parents bool) {
		for _, c := range l.cols {
			if hasPrefix(c.path, p) || parents && len(c.path) < len(p) && hasPrefix(p, c.path) {
				assign(c, "NULL")
			}
		}
		ov = "pg_temp.tide_unset(" + ov + ", " + arg(p) + "::text[], " + strconv.FormatBool(parents) + ")"
		ovChanged = true
	}
	var walker fieldWalker
	// setFlat sets flattened path p to v as an insert writes a field:
	// the columns of its fields, typed, and _tide_overflow.
	setFlat := func(p []string, v bsoncore.Value) {
		clearFlat(p, true)
		walker.walk(nestedDoc(p, v), s.cfg.FlattenDepth, true, func(f *field) {
			put := func(js []byte) {
				at := len(*buf)
				*buf = append(*buf, js...)
				ov = "pg_temp.tide_set(" + ov + ", " + arg(f.path()) + "::text[], " + arg((*buf)[at:len(*buf):len(*buf)]) + "::jsonb)"
			}
			switch {
			case f.empty:
				put([]byte("{}"))
				return
			case f.value.Type == bsoncore.TypeNull:
				put([]byte("null"))
				return
			}
			c := l.byPath[string(f.key)]
			if c != nil && fits(c.kind, c.pin, f.value) {
				var v any
				var ok bool
				if v, *buf, ok = value(c.kind, f.value, *buf); ok {
					assign(c, arg(v))
					if c.kind == kTimestamp {
						put(appendOverflowValue(nil, f.value))
					}
					return
				}
			}
			if guard == "" { // not counted for the reading a row may not take
				path := f.path()
				name := ""
				if c != nil {
					name = c.name
				} else {
					name = l.nameFor(path)
				}
				ts.drifted(name, path, typeName(f.value), c)
			}
			put(appendOverflowValue(nil, f.value))
		})
	}
	for _, op := range ops {
		dotted := strings.Join(op.path, ".")
		col, rest, flat, either := l.deltaTarget(op.path, s.cfg.FlattenDepth)
		switch {
		case flat && op.what == 't':
			col, rest = l.byPath[pathKey(op.path)], []string{} // not nil: NULL
		case flat && op.what == 'u':
			clearFlat(op.path, false)
			continue
		case flat && op.what == 's':
			setFlat(op.path, op.value)
			continue
		case either && op.what != 't':
			// tags.3: flattened where the row's tags column is NULL,
			// inside it where it is not.
			guard = "t." + quote(col.name) + " IS NULL"
			before := ov
			if op.what == 'u' {
				clearFlat(op.path, false)
			} else {
				setFlat(op.path, op.value)
			}
			ov = "CASE WHEN " + guard + " THEN " + ov + " ELSE " + before + " END"
			guard = ""
		}
		if col == nil || col.kind != kJSON {
			// The field has no jsonb column (past the column cap, or a
			// column of another type): a value with fields or elements
			// to edit is one that did not fit it, in _tide_overflow.
			p := arg(op.path) + "::text[]"
			switch op.what {
			case 't':
				ov = "pg_temp.tide_truncate(" + ov + ", " + p + ", " + strconv.Itoa(int(op.size)) + ")"
			case 'u':
				ov = "pg_temp.tide_unset(" + ov + ", " + p + ", false)"
			case 's':
				at := len(*buf)
				*buf = appendOverflowValue(*buf, op.value)
				ov = "pg_temp.tide_set(" + ov + ", " + p + ", " + arg((*buf)[at:len(*buf):len(*buf)]) + "::jsonb)"
			}
			ovChanged = true
			continue
		}
		// An edit inside the jsonb value of col.
		p := arg(rest) + "::text[]"
		var e string
		switch op.what {
		case 't':
			e = "pg_temp.tide_truncate(" + current(col) + ", " + p + ", " + strconv.Itoa(int(op.size)) + ")"
		case 'u':
			e = "pg_temp.tide_unset(" + current(col) + ", " + p + ", false)"
		case 's':
			v, err := jsonValue(op.value)
			if err != nil {
				return fmt.Errorf("value of %s: %w", dotted, err)
			}
			e = "pg_temp.tide_set(" + current(col) + ", " + p + ", " + v + ")"
		}
		if either {
			e = "CASE WHEN t." + quote(col.name) + " IS NULL THEN " + current(col) + " ELSE " + e + " END"
		}
		assign(col, e)
	}
	first := true
	for _, c := range order {
		if !first {
			set.WriteString(", ")
		}
		first = false
		set.WriteString(quote(c.name) + " = " + exprs[c])
	}
	if ovChanged {
		if !first {
			set.WriteString(", ")
		}
		first = false
		set.WriteString(overflowColumn + " = nullif(" + ov + ", '{}'::jsonb)")
	}
	if first {
		set.WriteString(overflowColumn + " = t." + overflowColumn)
	}
	return nil
}

func hasPrefix(p, prefix []string) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i := range prefix {
		if p[i] != prefix[i] {
			return false
		}
	}
	return true
}
