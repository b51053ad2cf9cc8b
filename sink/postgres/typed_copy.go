package postgres

import (
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/encode"
)

// typedSource feeds the live rows of one typed table to COPY into its
// staging table, each document's fields in the columns the layout gives
// them, and the rest in _tide_overflow.
type typedSource struct {
	s      *Sink
	tbl    int
	ts     *typedState
	l      *layout
	i      int
	vals   []any
	buf    []byte // this row's text: key, ObjectId hex, jsonb values, overflow
	walker fieldWalker
	over   overflow
	err    error
}

func (s *Sink) typedSource(tbl int) *typedSource {
	ts := s.tables[tbl].typed
	return &typedSource{s: s, tbl: tbl, ts: ts, l: ts.pending, i: -1, vals: make([]any, len(ts.send)+5)}
}

func (c *typedSource) Next() bool {
	rows := c.s.stage.rows
	for c.i++; c.i < len(rows); c.i++ {
		if r := &rows[c.i]; !r.dead && !r.delta && r.tbl == c.tbl {
			return true
		}
	}
	return false
}

func (c *typedSource) Err() error { return c.err }

func (c *typedSource) Values() ([]any, error) {
	st := &c.s.stage
	r := &st.rows[c.i]
	l := c.l
	clear(c.vals)
	c.buf = c.buf[:0]
	n := len(c.ts.send)
	if l.key != kNone {
		key := bsoncore.Document(st.bytes(r.rawKey))
		var err error
		if c.vals[0], c.buf, err = keyValue(l.key, key, c.buf); err != nil {
			c.err = fmt.Errorf("document key %s: %w", keyText(key), err)
			return nil, c.err
		}
	}
	c.vals[n+2], c.vals[n+3], c.vals[n+4] = string(r.op), r.ct, r.del
	raw, ok := st.document(r)
	if !ok {
		return c.vals, nil
	}
	c.over.reset()
	doc := bsoncore.Document(raw)
	c.walker.walk(doc, c.s.cfg.FlattenDepth, c.s.stage.mirror, func(f *field) {
		if f.empty {
			c.over.add(f.parts, []byte("{}"))
			return
		}
		if f.value.Type == bsoncore.TypeNull {
			c.over.add(f.parts, []byte("null"))
			return
		}
		col := l.byPath[string(f.key)]
		if col != nil && col.idx < len(c.ts.pos) && c.ts.pos[col.idx] >= 0 && fits(col.kind, col.pin, f.value) {
			var v any
			var ok bool
			if v, c.buf, ok = value(col.kind, f.value, c.buf); ok {
				c.vals[1+c.ts.pos[col.idx]] = v
				if col.kind != kTimestamp {
					return
				}
				// timestamptz holds a timestamp's seconds; its increment
				// lives with the exact value in _tide_overflow.
				c.over.add(f.parts, appendOverflowValue(nil, f.value))
				return
			}
		}
		path := f.path()
		name := ""
		if col != nil {
			name = col.name
		} else {
			name = l.nameFor(path) // past the column cap
		}
		c.ts.drifted(name, path, typeName(f.value), col)
		c.over.add(f.parts, appendOverflowValue(nil, f.value))
	})
	if !c.over.empty() {
		at := len(c.buf)
		c.buf = c.over.appendJSON(c.buf)
		c.vals[n+1] = c.buf[at:]
	}
	return c.vals, nil
}

// drifted counts a value that went to _tide_overflow instead of its
// column, and records its type once per batch.
func (ts *typedState) drifted(name string, path []string, bsonType string, col *tcol) {
	if ts.drift == nil {
		ts.drift, ts.driftSeen = map[string]int64{}, map[[2]string]bool{}
	}
	ts.drift[name]++
	k := [2]string{name, bsonType}
	if ts.driftSeen[k] {
		return
	}
	ts.driftSeen[k] = true
	note, pgType := "past the column cap", ""
	if col != nil {
		note, pgType = "does not fit "+col.sqlType(), col.sqlType()
	}
	ts.records = append(ts.records, colRecord{column: name, path: append([]string(nil), path...), bson: bsonType, pgType: pgType, decision: "overflow", note: note})
}

// keyValue converts a document key for an _id column of kind k.
func keyValue(k kind, key bsoncore.Document, buf []byte) (any, []byte, error) {
	id, sole := soleID(key)
	if k != kJSON {
		if !sole {
			return nil, buf, errors.New("not a single _id")
		}
		if k == kInt64 {
			if id.Type == bsoncore.TypeInt32 {
				return int64(id.Int32()), buf, nil
			}
			return id.Int64(), buf, nil
		}
		v, buf, ok := value(k, id, buf)
		if !ok {
			return nil, buf, errors.New("not writable as " + k.pgType())
		}
		return v, buf, nil
	}
	at := len(buf)
	var err error
	if sole {
		buf, err = encode.AppendRelaxedValue(buf, bson.Type(id.Type), id.Data)
	} else {
		buf, err = encode.AppendRelaxed(buf, key)
	}
	if err != nil {
		return nil, buf[:at], err
	}
	if hasNUL(buf[at:]) {
		return nil, buf[:at], errors.New("it holds a NUL byte, which PostgreSQL cannot store in jsonb")
	}
	return buf[at:], buf, nil
}

// overflow builds a row's _tide_overflow object from (path, JSON value)
// entries added in document order, nesting paths that share a prefix.
type overflow struct {
	paths  [][]string
	values [][]byte
}

func (o *overflow) reset() {
	o.paths, o.values = o.paths[:0], o.values[:0]
}

func (o *overflow) empty() bool { return len(o.paths) == 0 }

func (o *overflow) add(parts [][]byte, js []byte) {
	path := make([]string, len(parts))
	for i, p := range parts {
		path[i] = string(p)
	}
	o.paths = append(o.paths, path)
	o.values = append(o.values, js)
}

// appendJSON writes the entries as one object. Entries arrive in
// document order, depth first, so those under one object are adjacent.
func (o *overflow) appendJSON(dst []byte) []byte {
	var open []string // the objects open, below the top
	dst = append(dst, '{')
	first := true
	for i, p := range o.paths {
		common := 0
		for common < len(open) && common < len(p)-1 && open[common] == p[common] {
			common++
		}
		for len(open) > common {
			dst = append(dst, '}')
			open = open[:len(open)-1]
		}
		for _, part := range p[len(open) : len(p)-1] {
			if !first {
				dst = append(dst, ',')
			}
			dst = appendJSONKey(dst, part)
			dst = append(dst, '{')
			open = append(open, part)
			first = true
		}
		if !first {
			dst = append(dst, ',')
		}
		dst = appendJSONKey(dst, p[len(p)-1])
		dst = append(dst, o.values[i]...)
		first = false
	}
	for range open {
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendJSONKey(dst []byte, k string) []byte {
	return append(appendJSONString(dst, k), ':')
}

// appendJSONString appends s as a JSON string; bytes that are not UTF-8
// become U+FFFD, as jsonb needs.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	s = strings.ToValidUTF8(s, "\uFFFD")
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// typedAppendSource feeds a typed append table's rows to COPY: each
// event's envelope columns, then its document's typed columns and
// _tide_overflow.
type typedAppendSource struct {
	env   *copySource
	typed *typedSource
	vals  []any
}

func (s *Sink) typedAppendSource(tbl int) *typedAppendSource {
	return &typedAppendSource{env: s.stage.appendSource(tbl), typed: s.typedSource(tbl)}
}

func (c *typedAppendSource) Next() bool {
	a, b := c.env.Next(), c.typed.Next()
	return a && b
}

func (c *typedAppendSource) Values() ([]any, error) {
	env, err := c.env.Values()
	if err != nil {
		return nil, err
	}
	typed, err := c.typed.Values()
	if err != nil {
		return nil, err
	}
	n := len(c.typed.ts.send)
	c.vals = append(append(c.vals[:0], env...), typed[1:n+2]...) // no key; the columns sent and _tide_overflow
	return c.vals, nil
}

func (c *typedAppendSource) Err() error { return errors.Join(c.env.Err(), c.typed.Err()) }
