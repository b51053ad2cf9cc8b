package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// prepareSchema creates the checkpoint table (when the sink keeps the
// checkpoint) and prepares the table, unless the table name is a
// template: those tables are prepared on first use.
func (s *Sink) prepareSchema(ctx context.Context) error {
	if s.keepsCheckpoint() {
		if err := s.createCheckpoints(ctx); err != nil {
			return err
		}
	}
	return s.prepareTables(ctx)
}

// prepareTable creates tb if missing and allowed, then checks its
// columns. Refusals are *batchError: no retry changes them.
func (s *Sink) prepareTable(ctx context.Context, tb *table) error {
	name := tb.sql.table
	if s.templated {
		name += fmt.Sprintf(" (for namespace %s)", tb.ns)
	}
	var exists bool
	if err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, tb.sql.table).Scan(&exists); err != nil {
		return fmt.Errorf("postgres sink: look up table %s: %w", name, err)
	}
	if !exists && tb.noCreate {
		tb.absent = true // nothing to drop or move
		return nil
	}
	if !exists {
		if !s.cfg.CreateTable {
			return &batchError{what: "table " + name + " does not exist, and create_table is false", err: errors.New("create it or set create_table: true")}
		}
		if s.wantTyped() && s.cfg.Mode == ModeAppend {
			return s.createTypedAppend(ctx, tb)
		}
		if s.wantTyped() {
			if s.renameSource(tb.idx) == nil && s.firstKey(tb.idx) == nil {
				// The first document key types its _id: wait for it.
				tb.deferred = true
				return nil
			}
			tb.deferred = false
			return s.createTyped(ctx, tb)
		}
		if _, err := s.conn.Exec(ctx, tb.sql.createTable); err != nil {
			return classify(err, &batchError{what: "create table " + name, err: err})
		}
		if tb.sql.createKeyIndex != "" {
			if _, err := s.conn.Exec(ctx, tb.sql.createKeyIndex); err != nil {
				return classify(err, &batchError{what: "create index on _key of " + name, err: err})
			}
		}
		s.log.Info("created table", "mode", s.cfg.Mode, "created", tb.name, "namespace", tb.ns)
		return nil
	}
	cols, err := s.readColumns(ctx, tb, name)
	if err != nil {
		return err
	}
	if hasColumn(cols, overflowColumn) {
		if s.cfg.Columns == ColumnsDocument {
			s.log.Info("table has typed columns; it keeps them although columns is document", "table", tb.name)
		}
		if s.cfg.Mode == ModeAppend {
			if err := s.checkTable(ctx, tb, name, cols); err != nil { // the envelope's columns
				return err
			}
		}
		return s.loadTyped(ctx, tb, cols)
	}
	if s.cfg.Columns == ColumnsAuto {
		s.log.Info("table has the document layout; it keeps it although columns is auto", "table", tb.name)
	}
	return s.checkTable(ctx, tb, name, cols)
}

// catalogColumn is a column of an existing table.
type catalogColumn struct {
	name, typ        string
	notNull, defined bool
	attnum           int
}

func hasColumn(cols []catalogColumn, name string) bool {
	for _, c := range cols {
		if c.name == name {
			return true
		}
	}
	return false
}

// readColumns reads the columns of an existing table, and in attnum of
// the last one the count PostgreSQL holds against its column limit,
// dropped columns included.
func (s *Sink) readColumns(ctx context.Context, tb *table, name string) ([]catalogColumn, error) {
	rows, err := s.conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef OR a.attidentity <> '', a.attnum, a.attisdropped
	FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 ORDER BY a.attnum`, tb.sql.table)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
	}
	defer rows.Close()
	var cols []catalogColumn
	var dropped catalogColumn
	for rows.Next() {
		var c catalogColumn
		var isDropped bool
		if err := rows.Scan(&c.name, &c.typ, &c.notNull, &c.defined, &c.attnum, &isDropped); err != nil {
			return nil, fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
		}
		if isDropped {
			dropped.attnum = c.attnum
			continue
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
	}
	if n := len(cols); dropped.attnum > 0 && (n == 0 || cols[n-1].attnum < dropped.attnum) {
		// Keep the highest attnum in the list's last entry's reach.
		cols = append(cols, catalogColumn{name: "", attnum: dropped.attnum})
	}
	return cols, nil
}

func (s *Sink) createCheckpoints(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, s.sql.createCheckpoints); err != nil {
		return fmt.Errorf("postgres sink: create checkpoint table %s: %w", s.sql.checkpoints, err)
	}
	return nil
}

// checkTable compares an existing table with the columns the mode writes
// and returns one error listing every difference.
func (s *Sink) checkTable(ctx context.Context, tb *table, name string, cols []catalogColumn) error {
	want := mirrorColumns
	if s.cfg.Mode == ModeAppend {
		want = appendColumns
	}
	type have struct {
		typ              string
		notNull, defined bool
	}
	got := map[string]have{}
	var order []string
	for _, c := range cols {
		if c.name == "" {
			continue
		}
		got[c.name] = have{c.typ, c.notNull, c.defined}
		order = append(order, c.name)
	}

	var diffs []string
	wanted := map[string]bool{}
	for _, c := range want {
		wanted[c.name] = true
		h, ok := got[c.name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("column %s is missing (want %s)", c.name, c.typ))
		case h.typ != c.typ:
			diffs = append(diffs, fmt.Sprintf("column %s is %s, want %s", c.name, h.typ, c.typ))
		}
	}
	for _, name := range order {
		if h := got[name]; !wanted[name] && h.notNull && !h.defined {
			diffs = append(diffs, fmt.Sprintf("column %s is NOT NULL without a default, and tide does not write it", name))
		}
	}
	if s.cfg.Mode == ModeMirror && got["_id"].typ == "text" {
		var unique bool
		err := s.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
		AND i.indexprs IS NULL AND a.attname = '_id')`, tb.sql.table).Scan(&unique)
		if err != nil {
			return fmt.Errorf("postgres sink: read indexes of %s: %w", name, err)
		}
		if !unique {
			diffs = append(diffs, "column _id has no primary key or unique index: mirror mode upserts by _id")
		}
	}
	if len(diffs) > 0 {
		return &batchError{what: fmt.Sprintf("table %s is not compatible with %s mode", name, s.cfg.Mode), err: errors.New(strings.Join(diffs, "; "))}
	}
	return nil
}
