package postgres

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/encode"
)

// stage holds the rows of the batch being written, in the sink's own
// memory, so that the batch can be sent again after a lost connection.
type stage struct {
	mirror  bool
	partial bool             // mirror: updates without a full document are applied from their update description
	buf     []byte           // documents (mirror) or envelopes (append), and raw document keys
	rows    []row            // in event order; in mirror mode dead rows were superseded
	index   map[tableKey]int // mirror: table and document key -> index in rows of its last event
	live    int              // rows not superseded
	upsert  int              // live rows that upsert (mirror)
	del     int              // live rows that delete (mirror)
	skipped int              // updates without a full document (mirror)
	deltas  int              // live rows that apply an update description (mirror)
	colls   []collOp         // drops and renames of collections with a table each (mirror), in event order
	app     []appendRow      // append: the columns of rows[i], at app[i]
	tmp     []byte
	typed   []bool // by table index: the table has typed columns, and its own staging table
}

// shared reports whether row r goes to the shared staging table (its
// table has the document layout).
func (st *stage) shared(r *row) bool { return r.tbl >= len(st.typed) || !st.typed[r.tbl] }

// row is one staged event. Offsets are into stage.buf.
type row struct {
	key      string // mirror: the document key in canonical Extended JSON
	rawKey   span   // the raw BSON document key, for error messages
	data     span   // mirror: the full document, raw BSON; append: the envelope
	op       cdc.Op
	ct       int64 // cluster time: seconds<<32 | increment
	del      bool
	dead     bool // superseded by a later event for the same key
	delta    bool // mirror: an update applied from its update description, in data
	prev     int  // mirror: 1 + the index of the previous row of the same key, or 0
	hasData  bool
	full     span // append: the raw full document, if the event has one
	hasFull  bool
	position string // the event's position, for error messages
	tbl      int    // index of the row's table in Sink.tables
}

type span struct{ from, to int }

func (st *stage) reset() {
	st.buf = st.buf[:0]
	clear(st.rows)
	st.rows = st.rows[:0]
	clear(st.index)
	st.live, st.upsert, st.del, st.skipped, st.deltas = 0, 0, 0, 0, 0
	st.colls = st.colls[:0]
	st.app = st.app[:0]
}

// collOp is a collection's drop, or its rename to another table, applied
// after the batch's rows: the rows it covers are those with a cluster
// time up to its own, so the order of the statements does not matter,
// and applying it again changes nothing.
type collOp struct {
	rename bool
	tbl    int // the dropped or renamed collection's table
	to     int // a rename's new table
	ct     int64
}

func (st *stage) bytes(s span) []byte { return st.buf[s.from:s.to] }

func clusterTime(t cdc.Timestamp) int64 { return int64(uint64(t.T)<<32 | uint64(t.I)) }

// tableKey is a document key within one of the sink's tables.
type tableKey struct {
	tbl int
	key string
}

// add stages rec for table tbl, copying what it needs: the sink must not
// retain rec.
func (st *stage) add(rec *cdc.Record, tbl int) error {
	ev := &rec.Event
	r := row{op: ev.Op, ct: clusterTime(ev.ClusterTime), tbl: tbl}
	at := len(st.buf)
	st.buf = append(st.buf, ev.DocumentKey...)
	r.rawKey = span{at, len(st.buf)}

	if !st.mirror {
		at = len(st.buf)
		st.buf = append(st.buf, rec.Data...)
		r.data, r.hasData = span{at, len(st.buf)}, true
		var a appendRow
		var err error
		if st.buf, err = splitEnvelope(st.buf, at, &a); err != nil {
			st.buf = st.buf[:r.rawKey.from]
			return fmt.Errorf("postgres append: record of %s at position %s: envelope: %w (append mode needs the json or canonical envelope)", ev.Op, ev.Pos, err)
		}
		if ev.FullDocument != nil {
			// For typed columns (a table with _tide_overflow).
			at = len(st.buf)
			st.buf = append(st.buf, ev.FullDocument...)
			r.full, r.hasFull = span{at, len(st.buf)}, true
		}
		r.position = string(ev.Pos)
		st.rows = append(st.rows, r)
		st.app = append(st.app, a)
		st.live++
		return nil
	}

	switch {
	case ev.Op == cdc.OpSnapshot && ev.DocumentKey == nil && ev.FullDocument == nil:
		// A re-snapshot's begin or end line (tide snapshot): it marks a
		// gap closed by a re-copy and changes no document.
		st.buf = st.buf[:r.rawKey.from]
		return nil
	case documentOp(ev.Op) && ev.Op != cdc.OpDelete:
		if ev.FullDocument == nil && ev.Op == cdc.OpUpdate && ev.UpdateDesc != nil && st.partial {
			// Applied from its update description: the fields it sets,
			// removes and truncates (a delta stream).
			if err := bsoncore.Document(ev.UpdateDesc).Validate(); err != nil {
				st.buf = st.buf[:r.rawKey.from]
				return fmt.Errorf("postgres mirror: update description of %s at position %s: %w", keyText(ev.DocumentKey), ev.Pos, err)
			}
			r.delta = true
		} else if ev.FullDocument == nil {
			st.buf = st.buf[:r.rawKey.from]
			if ev.Op == cdc.OpUpdate && ev.UpdateDesc != nil {
				// With full_document update_lookup, an update of a document
				// deleted since has no full document; its delete follows.
				// (A delta stream, where every update looks like this, sets
				// Config.PartialUpdates, and is applied above.)
				st.skipped++
				return nil
			}
			return fmt.Errorf("postgres mirror: %s of %s at position %s has no full document: "+
				"mirror mode needs full documents (source full_document update_lookup or required)", ev.Op, keyText(ev.DocumentKey), ev.Pos)
		}
	case ev.Op == cdc.OpDelete:
		r.del = true
	default:
		// Collection and database events (drop, rename, DDL, invalidate)
		// change no document: mirror mode has nothing to write for them.
		st.buf = st.buf[:r.rawKey.from]
		return nil
	}
	if ev.DocumentKey == nil {
		st.buf = st.buf[:r.rawKey.from]
		return fmt.Errorf("postgres mirror: %s event on %s at position %s has no document key: mirror mode needs a document-shaped source such as MongoDB", ev.Op, ev.Namespace, ev.Pos)
	}
	var err error
	st.tmp, err = encode.AppendCanonical(st.tmp[:0], ev.DocumentKey)
	if err != nil {
		st.buf = st.buf[:r.rawKey.from]
		return fmt.Errorf("postgres mirror: document key of %s event at position %s: %w", ev.Op, ev.Pos, err)
	}
	if r.delta {
		at = len(st.buf)
		st.buf = append(st.buf, ev.UpdateDesc...)
		r.data, r.hasData = span{at, len(st.buf)}, true
	} else if !r.del {
		// Raw BSON: the table's layout (typed columns, or the document
		// as jsonb) decides at COPY time how it is written.
		if err := bsoncore.Document(ev.FullDocument).Validate(); err != nil {
			st.buf = st.buf[:r.rawKey.from]
			return fmt.Errorf("postgres mirror: full document of %s at position %s: %w", keyText(ev.DocumentKey), ev.Pos, err)
		}
		at = len(st.buf)
		st.buf = append(st.buf, ev.FullDocument...)
		r.data, r.hasData = span{at, len(st.buf)}, true
	}
	if st.index == nil {
		st.index = make(map[tableKey]int)
	}
	if i, ok := st.index[tableKey{tbl, string(st.tmp)}]; ok {
		r.key = st.rows[i].key
		r.prev = i + 1
		if !r.delta {
			// The last full document or delete of a key decides its row:
			// the events before it, updates applied from their
			// description included, are superseded. An update
			// description applies after the rows before it, in order.
			st.supersede(i)
		}
	} else {
		r.key = string(st.tmp)
	}
	st.index[tableKey{tbl, r.key}] = len(st.rows)
	r.position = string(ev.Pos)
	st.rows = append(st.rows, r)
	st.live++
	switch {
	case r.delta:
		st.deltas++
	case r.del:
		st.del++
	default:
		st.upsert++
	}
	return nil
}

// supersede marks row i, and the rows of the same key before it, dead.
func (st *stage) supersede(i int) {
	for ; i >= 0; i = st.rows[i].prev - 1 {
		prev := &st.rows[i]
		if prev.dead {
			return // so are the ones before it
		}
		prev.dead = true
		st.live--
		switch {
		case prev.delta:
			st.deltas--
		case prev.del:
			st.del--
		default:
			st.upsert--
		}
	}
}

// documentOp reports whether op changes one document, as opposed to a
// collection or a database.
func documentOp(op cdc.Op) bool {
	switch op {
	case cdc.OpInsert, cdc.OpReplace, cdc.OpUpdate, cdc.OpSnapshot, cdc.OpDelete:
		return true
	}
	return false
}

// keyText renders a raw document key for a message.
func keyText(key []byte) string {
	if key == nil {
		return "a document without a key"
	}
	b, err := encode.AppendCanonical(nil, key)
	if err != nil {
		return fmt.Sprintf("a malformed document key (%v)", err)
	}
	return string(b)
}

// nthLive returns the row sent as the n-th line (from 1) of the COPY
// of table tbl's rows, or of every table's (tbl < 0).
func (st *stage) nthLive(n, tbl int) (*row, bool) {
	for i := range st.rows {
		if st.rows[i].dead || st.rows[i].delta || tbl >= 0 && st.rows[i].tbl != tbl || tbl < 0 && st.mirror && !st.shared(&st.rows[i]) {
			continue
		}
		n--
		if n == 0 {
			return &st.rows[i], true
		}
	}
	return nil, false
}

// copySource feeds the live rows to COPY. It implements
// pgx.CopyFromSource; Values' slice is reused, which CopyFrom allows
// because it encodes each row before asking for the next.
type copySource struct {
	st   *stage
	i    int
	tbl  int // append: the table whose rows to feed
	vals []any
	json []byte // mirror: the row's document as relaxed Extended JSON, reused
	err  error
}

// source feeds the mirror's staging table.
func (st *stage) source() *copySource {
	return &copySource{st: st, i: -1, tbl: -1, vals: make([]any, 0, 6)}
}

// appendSource feeds the rows of table tbl to COPY into it (append).
func (st *stage) appendSource(tbl int) *copySource {
	return &copySource{st: st, i: -1, tbl: tbl, vals: make([]any, 0, nFields)}
}

func (c *copySource) Next() bool {
	for c.i++; c.i < len(c.st.rows); c.i++ {
		if r := &c.st.rows[c.i]; !r.dead && !r.delta && (c.tbl < 0 && c.st.shared(r) || r.tbl == c.tbl) {
			return true
		}
	}
	return false
}

func (c *copySource) Values() ([]any, error) {
	r := &c.st.rows[c.i]
	c.vals = c.vals[:0]
	if !c.st.mirror {
		a := &c.st.app[c.i]
		for f := range nFields {
			var v any
			switch {
			case !a.valid[f]:
			case fieldKinds[f] == kindInt:
				v = a.ints[f]
			default:
				v = c.st.bytes(a.span[f])
			}
			c.vals = append(c.vals, v)
		}
		return c.vals, nil
	}
	var doc any
	if r.hasData {
		var err error
		c.json, err = encode.AppendRelaxed(c.json[:0], c.st.bytes(r.data))
		if err != nil {
			c.err = fmt.Errorf("full document of %s at position %s: %w", r.key, r.position, err)
			return nil, c.err
		}
		doc = c.json
	}
	return append(c.vals, r.key, doc, string(r.op), r.ct, r.del, int32(r.tbl)), nil
}

func (c *copySource) Err() error { return c.err }

// tableCount counts the live rows of one table.
// Rows applied from an update description count in delta only.
type tableCount struct{ live, upsert, del, delta int }

// perTable counts the live rows of each of n tables.
func (st *stage) perTable(n int) []tableCount {
	counts := make([]tableCount, n)
	for i := range st.rows {
		r := &st.rows[i]
		if r.dead {
			continue
		}
		c := &counts[r.tbl]
		if r.delta {
			c.delta++
			continue
		}
		c.live++
		if r.del {
			c.del++
		} else {
			c.upsert++
		}
	}
	return counts
}

// document returns the raw full document of a row, for typed columns.
func (st *stage) document(r *row) ([]byte, bool) {
	if st.mirror {
		return st.bytes(r.data), r.hasData
	}
	return st.bytes(r.full), r.hasFull
}
