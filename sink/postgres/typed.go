package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

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
	mergeSend  []int

	// Per batch: the columns (indexes in pending.cols) the batch has
	// values for, which alone are sent, and where each is sent.
	used []bool
	send []int
	pos  []int // pending.cols index -> position in send, or -1

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

// plan decides, for each typed table with rows in the batch, the columns
// to add and widen, and returns the statements that do it in the
// batch's transaction, with the staging tables to make. Every value is
// looked at once here; the COPY writes each where the final layout says.
func (s *Sink) plan() []string {
	var ddl []string
	for _, tb := range s.tables {
		if tb.typed == nil {
			continue
		}
		ts := tb.typed
		ts.pending, ts.records, ts.pendingStage = ts.layout, ts.records[:0], false
		ts.used = ts.used[:0]
		clear(ts.drift)
		clear(ts.driftSeen)
	}
	var walker fieldWalker
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
		if r.delta {
			ddl = s.planDelta(tb, bsoncore.Document(s.stage.bytes(r.data)), &walker, ddl)
			continue
		}
		raw, ok := s.stage.document(r)
		if !ok {
			continue
		}
		doc := bsoncore.Document(raw)
		walker.walk(doc, s.cfg.FlattenDepth, s.stage.mirror, func(f *field) {
			var c *tcol
			c, ddl = s.planField(tb, f, ddl)
			if c != nil {
				ts.use(c.idx)
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
	return ddl
}

// planField decides what field f of a row of tb needs: a new column, a
// type seen, a widening; it returns the column that holds the field's
// path, if any, and ddl with the statements added.
func (s *Sink) planField(tb *table, f *field, ddl []string) (*tcol, []string) {
	ts := tb.typed
	if f.empty || f.value.Type == bsoncore.TypeNull {
		return nil, ddl // kept in _tide_overflow; makes no column
	}
	l := ts.pending
	c := l.byPath[string(f.key)]
	if c == nil {
		if l.full() {
			return nil, ddl // past the column cap: _tide_overflow
		}
		k := natural(f.value)
		l = ts.own()
		path := f.path()
		name := l.nameFor(path)
		p := s.pins[name]
		c = l.add(path, k, p, typeName(f.value))
		c.seen = typeBit(f.value)
		decision := "added"
		if p != nil {
			decision = "pinned"
		}
		ddl = append(ddl, `ALTER TABLE `+tb.sql.table+` ADD COLUMN IF NOT EXISTS `+quote(c.name)+` `+c.sqlType())
		ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: c.bson, pgType: c.sqlType(),
			decision: decision, note: collisionNote(c)})
		return c, ddl
	}
	if fits(c.kind, c.pin, f.value) {
		if bit := typeBit(f.value); c.seen&bit == 0 {
			// A type the column holds that it had not held yet.
			c = ts.own().byPath[string(f.key)]
			c.seen |= bit
			ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: typeName(f.value), pgType: c.sqlType(), decision: "seen"})
		}
		return c, ddl
	}
	if c.pin != nil {
		return c, ddl // to _tide_overflow when written
	}
	if to := widen(c.kind, f.value); to != kNone {
		l = ts.own()
		c = l.byPath[string(f.key)]
		c.kind = to
		c.seen |= typeBit(f.value)
		ddl = append(ddl, `ALTER TABLE `+tb.sql.table+` ALTER COLUMN `+quote(c.name)+` TYPE `+to.pgType())
		ts.records = append(ts.records, colRecord{column: c.name, path: c.path, bson: typeName(f.value), pgType: to.pgType(), decision: "widened"})
	}
	return c, ddl
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

// stageColumns are the columns the COPY into the staging table writes,
// in order: the key, the columns the batch has values for, and the rest.
func (ts *typedState) stageColumns() []string {
	l := ts.pending
	cols := make([]string, 0, len(ts.send)+5)
	cols = append(cols, "_id")
	for _, i := range ts.send {
		cols = append(cols, l.cols[i].name)
	}
	return append(cols, overflowColumn, "op", "ct", "del")
}

// mergeStatements returns the upsert and the delete of a typed table
// from its staging table: as for the document layout, an event replaces
// a row only if it is at least as recent, and a full document sets every
// column, so a field the document no longer has becomes NULL. Only the
// columns in send are inserted: the batch has no value for the others,
// whose excluded values are NULL, so wide tables of sparse documents
// cost what their values cost.
func mergeStatements(cfg Config, table, stage string, l *layout, send []int) mergeSQL {
	var cols, set strings.Builder
	cols.WriteString("_id")
	for _, i := range send {
		cols.WriteString(", " + quote(l.cols[i].name))
	}
	for _, c := range l.cols {
		q := quote(c.name)
		set.WriteString(q + " = excluded." + q + ", ")
	}
	stage = "pg_temp." + stage
	guard := ` WHERE t._tide_cluster_time <= excluded._tide_cluster_time`
	var m mergeSQL
	m.upsert = `INSERT INTO ` + table + ` AS t (` + cols.String() + `, _tide_overflow, _tide_op, _tide_cluster_time, _tide_deleted, _tide_synced_at)
	SELECT ` + cols.String() + `, _tide_overflow, op, ct, false, now() FROM ` + stage + ` WHERE NOT del
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

// mergeSQL returns the upsert and delete of the table from its staging
// table, for the layout the batch writes.
func (ts *typedState) mergeSQL(cfg Config, table string) mergeSQL {
	if ts.mergeFor != ts.pending || ts.mergeStage != ts.stageNow() || !slices.Equal(ts.mergeSend, ts.send) {
		ts.merge = mergeStatements(cfg, table, ts.stageNow(), ts.pending, ts.send)
		ts.mergeFor, ts.mergeStage, ts.mergeSend = ts.pending, ts.stageNow(), slices.Clone(ts.send)
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
	ddl := s.planRenames(s.plan())
	for _, tb := range s.tables {
		if tb.typed != nil {
			tb.typed.sendOnly()
		}
	}
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
		if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{"pg_temp", tb.typed.stageNow()}, tb.typed.stageColumns(), src); err != nil {
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

// use records that the batch has a value for column i.
func (ts *typedState) use(i int) {
	for len(ts.used) <= i {
		ts.used = append(ts.used, false)
	}
	ts.used[i] = true
}

// sendOnly fixes the columns the batch sends: those it has values for.
func (ts *typedState) sendOnly() {
	ts.send = ts.send[:0]
	ts.pos = ts.pos[:0]
	for i := range ts.pending.cols {
		p := -1
		if i < len(ts.used) && ts.used[i] {
			p = len(ts.send)
			ts.send = append(ts.send, i)
		}
		ts.pos = append(ts.pos, p)
	}
}
