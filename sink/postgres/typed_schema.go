package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// columnsTable records, per typed table, each column's field path, the
// BSON types seen in it and what the sink decided, with when: how the
// table's shape evolved.
const columnsTable = "tide_columns"

func (s *Sink) createColumnsTable(ctx context.Context) error {
	if s.columnsReady {
		return nil
	}
	q := `CREATE TABLE IF NOT EXISTS ` + s.sql.columns + ` (
	table_name text NOT NULL,
	column_name text NOT NULL,
	path text[] NOT NULL,
	bson_type text NOT NULL,
	pg_type text NOT NULL,
	decision text NOT NULL,
	note text NOT NULL DEFAULT '',
	seen_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (table_name, column_name, bson_type, decision))`
	if _, err := s.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("postgres sink: create %s: %w", s.sql.columns, err)
	}
	s.columnsReady = true
	return nil
}

// firstKey returns the document key of the first staged row of table
// idx, or nil.
func (s *Sink) firstKey(idx int) bsoncore.Document {
	for i := range s.stage.rows {
		if r := &s.stage.rows[i]; r.tbl == idx {
			return s.stage.bytes(r.rawKey)
		}
	}
	return nil
}

// renameSource returns the typed table whose rows this batch moves to
// table idx, or nil.
func (s *Sink) renameSource(idx int) *table {
	for _, op := range s.stage.colls {
		if op.rename && op.to == idx && !s.tables[op.tbl].absent && s.tables[op.tbl].typed != nil {
			return s.tables[op.tbl]
		}
	}
	return nil
}

// createTyped creates a typed table: its _id typed after the first
// document key staged for it (or like the table whose rows a rename
// moves into it), and the system columns; the documents' fields add
// their columns in the batch's transaction.
func (s *Sink) createTyped(ctx context.Context, tb *table) error {
	if err := s.createColumnsTable(ctx); err != nil {
		return err
	}
	var l *layout
	if src := s.renameSource(tb.idx); src != nil {
		l = newLayout(src.typed.layout.key, src.typed.layout.keyBSON)
	} else {
		key := s.firstKey(tb.idx)
		if key == nil {
			return &batchError{what: "create table " + tb.sql.table, err: errors.New("no document key to type its _id by")}
		}
		k, b := keyKind(key)
		l = newLayout(k, b)
	}
	q := `CREATE TABLE IF NOT EXISTS ` + tb.sql.table + ` (
	_id ` + l.key.pgType() + ` PRIMARY KEY,
	_tide_overflow jsonb,
	_tide_op text NOT NULL,
	_tide_cluster_time bigint NOT NULL,
	_tide_deleted boolean NOT NULL DEFAULT false,
	_tide_synced_at timestamptz NOT NULL DEFAULT now())`
	b := &pgx.Batch{}
	b.Queue(q)
	rec := colRecord{column: "_id", path: []string{"_id"}, bson: l.keyBSON, pgType: l.key.pgType(), decision: "key"}
	b.Queue(s.sql.recordColumns, recordArgs(tb.name, []colRecord{rec})...)
	if err := s.conn.SendBatch(ctx, b).Close(); err != nil {
		return classify(err, &batchError{what: "create table " + tb.sql.table, err: err})
	}
	tb.typed = &typedState{layout: l, pending: l}
	s.log.Info("created typed table", "created", tb.name, "namespace", tb.ns, "key", l.key.pgType())
	return nil
}

// loadTyped reads the layout of an existing typed table from the
// catalog and tide_columns. A column tide_columns has no path for is not
// the sink's: it is left alone, and its name is not used.
func (s *Sink) loadTyped(ctx context.Context, tb *table, cols []catalogColumn) error {
	if err := s.createColumnsTable(ctx); err != nil {
		return err
	}
	rows, err := s.conn.Query(ctx, `SELECT column_name, path, bson_type, decision FROM `+s.sql.columns+`
	WHERE table_name = $1 ORDER BY seen_at, column_name`, tb.name)
	if err != nil {
		return fmt.Errorf("postgres sink: read %s of %s: %w", s.sql.columns, tb.sql.table, err)
	}
	type rec struct {
		path     []string
		bson     string
		decision string
	}
	recs := map[string]rec{}
	seen := map[string]uint64{}
	var order []string
	for rows.Next() {
		var name string
		var r rec
		if err := rows.Scan(&name, &r.path, &r.bson, &r.decision); err != nil {
			rows.Close()
			return fmt.Errorf("postgres sink: read %s of %s: %w", s.sql.columns, tb.sql.table, err)
		}
		if r.decision != "overflow" {
			seen[name] |= typeBitOf(r.bson)
		}
		if r.decision != "key" && r.decision != "added" && r.decision != "pinned" {
			continue
		}
		if _, ok := recs[name]; !ok {
			order = append(order, name)
			recs[name] = r // the first: what the column was made for
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres sink: read %s of %s: %w", s.sql.columns, tb.sql.table, err)
	}
	types := map[string]string{}
	attnums := 0
	for _, c := range cols {
		types[c.name] = c.typ
		attnums = max(attnums, c.attnum)
	}
	keyKind := kindOfType(types["_id"], recs["_id"].bson)
	if s.cfg.Mode == ModeAppend {
		keyKind = kNone // rows are events, keyed by id
	} else if keyKind == kNone {
		return &batchError{what: "table " + tb.sql.table + " is not a typed table tide can write", err: fmt.Errorf("its _id column is %s", types["_id"])}
	}
	l := newLayout(keyKind, recs["_id"].bson)
	if keyKind == kNone {
		l = newAppendLayout()
	}
	for _, c := range cols {
		l.taken[c.name] = true
	}
	for _, name := range order {
		r := recs[name]
		typ, ok := types[name]
		if name == "_id" && keyKind != kNone || !ok {
			continue // a mirror's key
		}
		c := &tcol{name: name, path: r.path, bson: r.bson, kind: kindOfType(typ, r.bson), idx: len(l.cols), seen: seen[name]}
		if c.kind == kNone {
			continue // a type the sink does not write: leave the column alone
		}
		if p, ok := s.pins[name]; ok {
			c.pin, c.kind = p, p.kind
		} else if typ != c.kind.pgType() && strings.HasPrefix(typ, "numeric(") {
			p, err := parsePin(typ) // pinned by an earlier configuration: keep its limits
			if err == nil {
				c.pin = &p
			}
		}
		delete(l.taken, name)
		l.cols = append(l.cols, c)
		l.byPath[pathKey(c.path)] = c
		l.byName[name] = c
	}
	l.attnums = attnums
	tb.typed = &typedState{layout: l, pending: l}
	return nil
}

// kindOfType maps a column type back to a kind, using the BSON type
// tide_columns recorded where the type is shared.
func kindOfType(typ, bsonType string) kind {
	switch {
	case typ == "text" && bsonType == "objectId":
		return kOID
	case typ == "text":
		return kText
	case typ == "integer":
		return kInt32
	case typ == "bigint":
		return kInt64
	case typ == "double precision":
		return kDouble
	case typ == "numeric" || strings.HasPrefix(typ, "numeric("):
		return kNumeric
	case typ == "boolean":
		return kBool
	case typ == "timestamp with time zone" && bsonType == "timestamp":
		return kTimestamp
	case typ == "timestamp with time zone":
		return kDate
	case typ == "uuid":
		return kUUID
	case typ == "bytea":
		return kBytes
	case typ == "jsonb":
		return kJSON
	}
	return kNone
}

// recordArgs are the arguments of statements.recordColumns.
func recordArgs(tableName string, recs []colRecord) []any {
	n := len(recs)
	cols, paths, bsons, types, decisions, notes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range recs {
		cols[i], bsons[i], types[i], decisions[i] = r.column, r.bson, r.pgType, r.decision
		notes[i] = strings.ToValidUTF8(r.note, "\uFFFD")
		paths[i] = pgTextArray(r.path)
	}
	return []any{tableName, cols, paths, bsons, types, decisions, notes}
}

// pgTextArray writes path as a text[] literal, so that paths of any
// length travel in one text[] of literals.
func pgTextArray(path []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range path {
		if i > 0 {
			b.WriteByte(',')
		}
		p = strings.ToValidUTF8(p, "\uFFFD") // text[] must be UTF-8; such a path is recorded as it reads
		b.WriteByte('"')
		for _, r := range p {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// createTypedAppend creates a typed append table: the envelope's
// columns, _tide_overflow, and the columns the documents' fields add in
// the batches' transactions.
func (s *Sink) createTypedAppend(ctx context.Context, tb *table) error {
	if err := s.createColumnsTable(ctx); err != nil {
		return err
	}
	q := strings.Replace(tb.sql.createTable, "\t_tide_synced_at timestamptz", "\t_tide_overflow jsonb,\n\t_tide_synced_at timestamptz", 1)
	if _, err := s.conn.Exec(ctx, q); err != nil {
		return classify(err, &batchError{what: "create table " + tb.sql.table, err: err})
	}
	tb.typed = &typedState{layout: newAppendLayout()}
	tb.typed.pending = tb.typed.layout
	s.log.Info("created typed table", "mode", s.cfg.Mode, "created", tb.name, "namespace", tb.ns)
	return nil
}

// newAppendLayout is the layout of a new typed append table: no key
// column, and the names of the envelope's columns taken.
func newAppendLayout() *layout {
	l := newLayout(kNone, "")
	delete(l.taken, "_id") // the document's _id is a column like the others
	for _, c := range appendColumns {
		l.taken[c.name] = true
	}
	l.attnums = len(appendColumns) + 1
	return l
}

// appendCopyColumns are the columns of a typed append table that COPY
// writes, in order: the envelope's, the typed ones the batch has values
// for, _tide_overflow.
func (ts *typedState) appendCopyColumns() []string {
	cols := make([]string, 0, len(appendCopyColumns)+len(ts.send)+1)
	cols = append(cols, appendCopyColumns...)
	for _, i := range ts.send {
		cols = append(cols, ts.pending.cols[i].name)
	}
	return append(cols, overflowColumn)
}
