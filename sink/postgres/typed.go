package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/tide-cdc/tide/encode"
)

// columnsTable records, per typed table, each column's field path, the
// BSON types seen in it and what the sink decided, with when: how the
// table's shape evolved.
const columnsTable = "tide_columns"

// typedState is what the sink knows of a typed table.
type typedState struct {
	layout  *layout // as committed
	pending *layout // as the batch being written leaves it; layout if unchanged

	// The session's staging table of this table, and the layout and
	// connection it was made for; made again, in the batch's
	// transaction, when either changed.
	stage        string
	stageFor     *layout
	stageSession int
	pendingStage bool // the attempt made the staging table for pending

	merge      mergeSQL // statements of mergeFor's layout and mergeStage
	mergeFor   *layout
	mergeStage string

	// A new staging table gets a new name: pgx caches the column types
	// of a COPY's table by the statement's text.
	pendingStageName string

	stageSessionPending int // the session the attempt made the staging table in

	// Per attempt: values that went to _tide_overflow, by column, and
	// the (column, BSON type) pairs to record.
	drift     map[string]int64
	driftSeen map[[2]string]bool
	records   []colRecord
}

// colRecord is a row of tide_columns.
type colRecord struct {
	column   string
	path     []string
	bson     string
	pgType   string
	decision string
	note     string
}

type mergeSQL struct {
	upsert, delete string
}

// wantTyped reports whether a new table gets typed columns.
func (s *Sink) wantTyped() bool { return s.cfg.Columns != ColumnsDocument }

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

// plan decides, for each typed table with rows in the batch, the columns
// to add and widen, and returns the statements that do it in the
// batch's transaction, with the staging tables to make. Every value is
// looked at once here; the COPY writes each where the final layout says.
func (s *Sink) plan() ([]string, error) {
	var ddl []string
	for _, tb := range s.tables {
		if tb.typed == nil {
			continue
		}
		ts := tb.typed
		ts.pending, ts.records, ts.pendingStage = ts.layout, ts.records[:0], false
		clear(ts.drift)
		clear(ts.driftSeen)
	}
	var path []string
	for i := range s.stage.rows {
		r := &s.stage.rows[i]
		tb := s.tables[r.tbl]
		if r.dead || tb.typed == nil {
			continue
		}
		ts := tb.typed
		key := bsoncore.Document(s.stage.bytes(r.rawKey))
		if s.stage.mirror && !keyFits(ts.pending.key, key) {
			l := ts.own()
			old := l.key
			l.key, l.keyBSON = kJSON, "mixed"
			ddl = append(ddl, `ALTER TABLE `+tb.sql.table+` ALTER COLUMN _id TYPE jsonb USING `+keyToJSON(old, "_id"))
			k, b := keyKind(key)
			ts.records = append(ts.records, colRecord{column: "_id", path: []string{"_id"}, bson: b, pgType: "jsonb",
				decision: "widened", note: "a key of type " + b + " (" + k.pgType() + ") in an _id of " + old.pgType()})
		}
		raw, ok := s.stage.document(r)
		if !ok {
			continue
		}
		doc := bsoncore.Document(raw)
		path = walkFields(doc, s.cfg.FlattenDepth, s.stage.mirror, path[:0], func(f field) {
			if f.empty || f.value.Type == bsoncore.TypeNull {
				return // kept in _tide_overflow; makes no column
			}
			l := ts.pending
			c := l.byPath[pathKey(f.path)]
			if c == nil {
				if l.full() {
					return // past the column cap: _tide_overflow
				}
				k := natural(f.value)
				l = ts.own()
				name := l.nameFor(f.path)
				p := s.pins[name]
				c = l.add(f.path, k, p, typeName(f.value))
				c.seen = typeBit(f.value)
				decision := "added"
				if p != nil {
					decision = "pinned"
				}
				ddl = append(ddl, `ALTER TABLE `+tb.sql.table+` ADD COLUMN IF NOT EXISTS `+quote(c.name)+` `+c.sqlType())
				ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: c.bson, pgType: c.sqlType(),
					decision: decision, note: collisionNote(c)})
				return
			}
			if fits(c.kind, c.pin, f.value) {
				if bit := typeBit(f.value); c.seen&bit == 0 {
					// A type the column holds that it had not held yet.
					c = ts.own().byPath[pathKey(f.path)]
					c.seen |= bit
					ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: typeName(f.value), pgType: c.sqlType(), decision: "seen"})
				}
				return
			}
			if c.pin != nil {
				return // to _tide_overflow when written
			}
			if to := widen(c.kind, f.value); to != kNone {
				l = ts.own()
				c = l.byPath[pathKey(f.path)]
				c.kind = to
				c.seen |= typeBit(f.value)
				ddl = append(ddl, `ALTER TABLE `+tb.sql.table+` ALTER COLUMN `+quote(c.name)+` TYPE `+to.pgType())
				ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: typeName(f.value), pgType: to.pgType(), decision: "widened"})
			}
		})
	}
	for _, tb := range s.tables {
		if tb.typed == nil {
			continue
		}
		ts := tb.typed
		if !s.stage.mirror || ts.stageFor == ts.pending && ts.stageSession == s.session {
			continue // append COPYs straight into the table
		}
		ddl = s.remakeStage(tb, ddl)
	}
	return ddl, nil
}

// own makes ts.pending a copy of the committed layout, once per batch,
// so that changes to it vanish if the batch does not commit.
func (ts *typedState) own() *layout {
	if ts.pending == ts.layout {
		ts.pending = ts.layout.clone()
	}
	return ts.pending
}

func collisionNote(c *tcol) string {
	if c.nameOf == "" {
		return ""
	}
	return "field " + c.nameOf + " renamed: its name was taken or too long"
}

// keyToJSON converts an _id column of kind k to jsonb, as the relaxed
// Extended JSON of the key's value, which is how jsonb keys are written;
// col names the column.
func keyToJSON(k kind, col string) string {
	switch k {
	case kJSON:
		return col
	case kOID:
		return `jsonb_build_object('$oid', ` + col + `)`
	case kUUID:
		return `jsonb_build_object('$binary', jsonb_build_object('base64', encode(uuid_send(` + col + `), 'base64'), 'subType', '04'))`
	}
	return `to_jsonb(` + col + `)`
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// createStage returns the statement that makes the session's staging
// table for rows of layout l.
func (l *layout) createStage(name string) string {
	var b strings.Builder
	b.WriteString(`CREATE TEMP TABLE ` + name + ` (_id ` + l.key.pgType())
	for _, c := range l.cols {
		b.WriteString(", " + quote(c.name) + " " + c.sqlType())
	}
	b.WriteString(`, _tide_overflow jsonb, op text, ct bigint, del boolean) ON COMMIT DELETE ROWS`)
	return b.String()
}

// stageColumns are the staging table's columns in COPY order.
func (l *layout) stageColumns() []string {
	cols := make([]string, 0, len(l.cols)+5)
	cols = append(cols, "_id")
	for _, c := range l.cols {
		cols = append(cols, c.name)
	}
	return append(cols, overflowColumn, "op", "ct", "del")
}

// mergeStatements returns the upsert and the delete of a typed table
// from its staging table: as for the document layout, an event replaces
// a row only if it is at least as recent, and a full document sets every
// column, so a field the document no longer has becomes NULL.
func mergeStatements(cfg Config, table, stage string, l *layout) mergeSQL {
	var cols, sel, set strings.Builder
	cols.WriteString("_id")
	sel.WriteString("_id")
	for _, c := range l.cols {
		q := quote(c.name)
		cols.WriteString(", " + q)
		sel.WriteString(", " + q)
		set.WriteString(q + " = excluded." + q + ", ")
	}
	stage = "pg_temp." + stage
	guard := ` WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
	var m mergeSQL
	m.upsert = `INSERT INTO ` + table + ` AS t (` + cols.String() + `, _tide_overflow, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
	SELECT ` + sel.String() + `, _tide_overflow, op, ct, false, now() FROM ` + stage + ` WHERE NOT del
	ON CONFLICT (_id) DO UPDATE SET ` + set.String() + `_tide_overflow = excluded._tide_overflow, _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = false, _tide_synced_at = excluded._tide_synced_at` + guard
	if cfg.SoftDelete {
		m.delete = `INSERT INTO ` + table + ` AS t (_id, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
	SELECT _id, op, ct, true, now() FROM ` + stage + ` WHERE del
	ON CONFLICT (_id) DO UPDATE SET _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = true, _tide_synced_at = excluded._tide_synced_at` + guard
	} else {
		m.delete = `DELETE FROM ` + table + ` AS t USING ` + stage + ` AS s WHERE s.del AND t._id = s._id AND t._tide_cluster_time <= s.ct`
	}
	return m
}

// moveTyped moves the rows of a renamed collection's typed table into
// the new name's typed table, column by field path; plan gave the target
// the columns it lacked, widened those it could, and made its _id jsonb
// if the keys differ in type. A column whose values the target's column
// of that path cannot take (another type, a pin, the column cap) moves
// them into the row's _tide_overflow, as a write would. Rows the batch
// deleted in the target after the rename stay deleted, as in moveRows.
func moveTyped(from, to *table) string {
	fl, tl := from.typed.pending, to.typed.pending
	key := "f._id"
	if fl.key != tl.key {
		key = keyToJSON(fl.key, "f._id") // plan made the target's jsonb
	}
	var dst, src, set strings.Builder
	overflow := "f._tide_overflow"
	for _, c := range fl.cols {
		tc := tl.byPath[pathKey(c.path)]
		col := "f." + quote(c.name)
		if tc == nil || !movesInto(c, tc) {
			if c.kind != kTimestamp { // a timestamp's exact value is in the overflow already
				overflow = overflowSet(overflow, c.path, col, columnToJSON(c.kind, col))
			}
			continue
		}
		dst.WriteString(", " + quote(tc.name))
		src.WriteString(", " + col)
	}
	for _, tc := range tl.cols {
		set.WriteString(quote(tc.name) + " = excluded." + quote(tc.name) + ", ")
	}
	return `INSERT INTO ` + to.sql.table + ` AS t (_id` + dst.String() + `, _tide_overflow, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
	SELECT ` + key + src.String() + `, ` + overflow + `, f._tide_op, f._tide_cluster_time, f._tide_deleted, f._tide_synced_at FROM ` + from.sql.table + ` AS f
	WHERE f._tide_cluster_time <= $1
	AND NOT EXISTS (SELECT 1 FROM pg_temp.` + to.typed.stageNow() + ` AS s WHERE s.del AND s._id = ` + key + ` AND s.ct > $1)
	ON CONFLICT (_id) DO UPDATE SET ` + set.String() + `_tide_overflow = excluded._tide_overflow, _tide_op = excluded._tide_op,
	_tide_cluster_time = excluded._tide_cluster_time, _tide_deleted = excluded._tide_deleted, _tide_synced_at = now()
	WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
}

// movesInto reports whether the values of column c go into column tc
// as they are, or cast without loss.
func movesInto(c, tc *tcol) bool {
	if tc.pin != nil && tc.pin.precision > 0 {
		return false // numeric(p,s) would round
	}
	if c.kind == tc.kind {
		return tc.pin == nil || c.pin == nil || tc.pin.typ == c.pin.typ
	}
	switch c.kind {
	case kInt32:
		return tc.kind == kInt64 || tc.kind == kNumeric || tc.kind == kDouble
	case kInt64:
		return tc.kind == kNumeric
	}
	return false
}

// overflowSet returns the SQL of overflow with the value js at path, where
// col is not NULL.
func overflowSet(overflow string, path []string, col, js string) string {
	out := `coalesce(` + overflow + `, '{}'::jsonb)`
	for i := 1; i < len(path); i++ { // make the objects on the way
		p := pgTextArray(path[:i])
		out = `jsonb_set(` + out + `, ` + literal(p) + `, coalesce(` + out + ` #> ` + literal(p) + `, '{}'::jsonb), true)`
	}
	out = `jsonb_set(` + out + `, ` + literal(pgTextArray(path)) + `, ` + js + `, true)`
	return `CASE WHEN ` + col + ` IS NULL THEN ` + overflow + ` ELSE ` + out + ` END`
}

// literal quotes s as an SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// columnToJSON is the SQL of a typed column's value as the relaxed
// Extended JSON a write puts in _tide_overflow.
func columnToJSON(k kind, col string) string {
	switch k {
	case kOID:
		return `jsonb_build_object('$oid', ` + col + `)`
	case kDouble, kNumeric:
		return `CASE WHEN ` + col + ` IN ('NaN', 'Infinity', '-Infinity') THEN jsonb_build_object('$numberDouble', ` + col + `::text) ELSE to_jsonb(` + col + `) END`
	case kDate:
		return `jsonb_build_object('$date', jsonb_build_object('$numberLong', (extract(epoch FROM ` + col + `) * 1000)::bigint::text))`
	case kUUID:
		return `jsonb_build_object('$binary', jsonb_build_object('base64', encode(uuid_send(` + col + `), 'base64'), 'subType', '04'))`
	case kBytes:
		return `jsonb_build_object('$binary', jsonb_build_object('base64', translate(encode(` + col + `, 'base64'), E'\n', ''), 'subType', '00'))`
	case kJSON:
		return col
	}
	return `to_jsonb(` + col + `)`
}

// planRenames gives the new name's typed table of each rename the
// columns of the old one that it lacks, and widens its integer columns
// where the old one's are wider.
func (s *Sink) planRenames(ddl []string) []string {
	for _, op := range s.stage.colls {
		from, to := s.tables[op.tbl], s.tables[op.to]
		if !op.rename || from.absent || from.typed == nil || to.typed == nil {
			continue
		}
		if fk, tk := from.typed.pending.key, to.typed.pending.key; fk != tk && tk != kJSON {
			l := to.typed.own()
			l.key, l.keyBSON = kJSON, "mixed"
			ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ALTER COLUMN _id TYPE jsonb USING `+keyToJSON(tk, "_id"))
			to.typed.records = append(to.typed.records, colRecord{column: "_id", path: []string{"_id"}, bson: from.typed.pending.keyBSON, pgType: "jsonb",
				decision: "widened", note: "keys of renamed " + from.name + " moved in"})
		}
		for _, c := range from.typed.pending.cols {
			tc := to.typed.pending.byPath[pathKey(c.path)]
			switch {
			case tc == nil:
				if to.typed.pending.full() {
					continue // moveTyped puts its values in _tide_overflow
				}
				l := to.typed.own()
				tc = l.add(c.path, c.kind, c.pin, c.bson)
				ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ADD COLUMN IF NOT EXISTS `+quote(tc.name)+` `+tc.sqlType())
				to.typed.records = append(to.typed.records, colRecord{column: tc.name, path: tc.path, bson: tc.bson, pgType: tc.sqlType(),
					decision: "added", note: "moved from renamed " + from.name})
			case tc.pin == nil && tc.kind != c.kind && c.pin == nil && widensTo(tc.kind, c.kind):
				l := to.typed.own()
				tc = l.byPath[pathKey(c.path)]
				tc.kind = c.kind
				ddl = append(ddl, `ALTER TABLE `+to.sql.table+` ALTER COLUMN `+quote(tc.name)+` TYPE `+c.kind.pgType())
				to.typed.records = append(to.typed.records, colRecord{column: tc.name, path: tc.path, bson: c.bson, pgType: c.kind.pgType(),
					decision: "widened", note: "moved from renamed " + from.name})
			}
		}
		if to.typed.pending != to.typed.layout && to.typed.stageFor != to.typed.pending {
			ddl = s.remakeStage(to, ddl)
		}
	}
	return ddl
}

// widensTo reports whether a column of kind from widens to kind to.
func widensTo(from, to kind) bool {
	switch from {
	case kInt32:
		return to == kInt64 || to == kNumeric
	case kInt64:
		return to == kNumeric
	}
	return false
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

// typedSource feeds the live rows of one typed table to COPY into its
// staging table, each document's fields in the columns the layout gives
// them, and the rest in _tide_overflow.
type typedSource struct {
	s    *Sink
	tbl  int
	ts   *typedState
	l    *layout
	i    int
	vals []any
	buf  []byte // this row's text: key, ObjectId hex, jsonb values, overflow
	path []string
	over overflow
	err  error
}

func (s *Sink) typedSource(tbl int) *typedSource {
	ts := s.tables[tbl].typed
	return &typedSource{s: s, tbl: tbl, ts: ts, l: ts.pending, i: -1, vals: make([]any, len(ts.pending.cols)+5)}
}

func (c *typedSource) Next() bool {
	rows := c.s.stage.rows
	for c.i++; c.i < len(rows); c.i++ {
		if r := &rows[c.i]; !r.dead && r.tbl == c.tbl {
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
	n := len(l.cols)
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
	c.path = walkFields(doc, c.s.cfg.FlattenDepth, c.s.stage.mirror, c.path[:0], func(f field) {
		if f.empty {
			c.over.add(f.path, []byte("{}"))
			return
		}
		if f.value.Type == bsoncore.TypeNull {
			c.over.add(f.path, []byte("null"))
			return
		}
		col := l.byPath[pathKey(f.path)]
		if col != nil && fits(col.kind, col.pin, f.value) {
			var v any
			var ok bool
			if v, c.buf, ok = value(col.kind, f.value, c.buf); ok {
				c.vals[1+c.colIndex(col)] = v
				if col.kind != kTimestamp {
					return
				}
				// timestamptz holds a timestamp's seconds; its increment
				// lives with the exact value in _tide_overflow.
				c.over.add(f.path, appendOverflowValue(nil, f.value))
				return
			}
		}
		name := ""
		if col != nil {
			name = col.name
		} else {
			name = l.nameFor(f.path) // past the column cap
		}
		c.ts.drifted(name, f.path, typeName(f.value), col)
		c.over.add(f.path, appendOverflowValue(nil, f.value))
	})
	if !c.over.empty() {
		at := len(c.buf)
		c.buf = c.over.appendJSON(c.buf)
		c.vals[n+1] = c.buf[at:]
	}
	return c.vals, nil
}

// colIndex returns the position of col in the layout's columns.
func (c *typedSource) colIndex(col *tcol) int { return col.idx }

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

func (o *overflow) add(path []string, js []byte) {
	o.paths = append(o.paths, append([]string(nil), path...))
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

// mergeSQL returns the upsert and delete of the table from its staging
// table, for the layout the batch writes.
func (ts *typedState) mergeSQL(cfg Config, table string) mergeSQL {
	if ts.mergeFor != ts.pending || ts.mergeStage != ts.stageNow() {
		ts.merge, ts.mergeFor, ts.mergeStage = mergeStatements(cfg, table, ts.stageNow(), ts.pending), ts.pending, ts.stageNow()
	}
	return ts.merge
}

// applyTyped runs in the batch's transaction before the rows are merged:
// it changes the typed tables' columns as the batch needs (and makes
// their staging tables), then COPYs each typed table's rows into its
// staging table.
func (s *Sink) applyTyped(ctx context.Context, counts []tableCount) error {
	st := &s.stage
	st.typed = st.typed[:0]
	anyTyped := false
	for _, tb := range s.tables {
		st.typed = append(st.typed, tb.typed != nil)
		anyTyped = anyTyped || tb.typed != nil
	}
	if !anyTyped {
		return nil
	}
	ddl, err := s.plan()
	if err != nil {
		return err
	}
	ddl = s.planRenames(ddl)
	for _, tb := range s.tables {
		if tb.typed != nil && tb.typed.pendingStage {
			tb.typed.stageSessionPending = s.session
		}
	}
	if len(ddl) > 0 {
		b := &pgx.Batch{}
		for _, q := range ddl {
			b.Queue(q)
		}
		br := s.conn.SendBatch(ctx, b)
		for _, q := range ddl {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return classify(err, &batchError{what: "change columns", sql: q, err: err})
			}
		}
		if err := br.Close(); err != nil {
			return classify(err, &batchError{what: "change columns", err: err})
		}
	}
	for i, tb := range s.tables {
		if tb.typed == nil || counts[i].live == 0 || !st.mirror {
			continue // append COPYs in apply, straight into the table
		}
		src := s.typedSource(i)
		if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{"pg_temp", tb.typed.stageNow()}, tb.typed.pending.stageColumns(), src); err != nil {
			if src.err != nil {
				return &batchError{what: "copy into staging table of " + tb.sql.table, err: src.err}
			}
			return classify(err, &batchError{what: "copy into staging table of " + tb.sql.table, err: err, key: s.copyErrorKey(err, i)})
		}
	}
	return nil
}

// committedTyped makes what the batch did to the typed tables' columns
// the sink's own, counts their drift, and logs the first drift of each
// column.
func (s *Sink) committedTyped() {
	for _, tb := range s.tables {
		ts := tb.typed
		if ts == nil {
			continue
		}
		ts.layout = ts.pending
		if ts.pendingStage {
			ts.stage, ts.stageFor, ts.stageSession, ts.pendingStage = ts.pendingStageName, ts.pending, ts.stageSessionPending, false
		}
		for col, n := range ts.drift {
			if s.drift.add(tb.name, col, n) {
				s.log.Warn("values that do not fit their column go to "+overflowColumn, "table", tb.name, "column", col)
			}
		}
		clear(ts.drift)
		clear(ts.driftSeen)
		ts.records = ts.records[:0]
	}
}

// stageNow is the name of the staging table the attempt writes.
func (ts *typedState) stageNow() string {
	if ts.pendingStage {
		return ts.pendingStageName
	}
	return ts.stage
}

// remakeStage appends the statements that replace tb's staging table
// with one for its pending layout, under a new name.
func (s *Sink) remakeStage(tb *table, ddl []string) []string {
	ts := tb.typed
	if ts.pendingStage {
		ddl = append(ddl, `DROP TABLE IF EXISTS pg_temp.`+ts.pendingStageName)
	}
	if ts.stage != "" && ts.stageSession == s.session {
		ddl = append(ddl, `DROP TABLE IF EXISTS pg_temp.`+ts.stage)
	}
	s.stageGen++
	ts.pendingStage = true
	ts.pendingStageName = "tide_stage_" + strconv.Itoa(tb.idx) + "_" + strconv.Itoa(s.stageGen)
	return append(ddl, ts.pending.createStage(ts.pendingStageName))
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

// appendColumns of a typed append table, in COPY order: the envelope's,
// the typed ones, _tide_overflow.
func (l *layout) appendCopyColumns() []string {
	cols := make([]string, 0, len(appendCopyColumns)+len(l.cols)+1)
	cols = append(cols, appendCopyColumns...)
	for _, c := range l.cols {
		cols = append(cols, c.name)
	}
	return append(cols, overflowColumn)
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
	n := len(c.typed.l.cols)
	c.vals = append(append(c.vals[:0], env...), typed[1:n+2]...) // no key; the columns and _tide_overflow
	return c.vals, nil
}

func (c *typedAppendSource) Err() error { return errors.Join(c.env.Err(), c.typed.Err()) }
