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
		if _, err := s.conn.Exec(ctx, tb.sql.createTable); err != nil {
			return classify(err, &batchError{what: "create table " + name, err: err})
		}
		s.log.Info("created table", "mode", s.cfg.Mode, "created", tb.name, "namespace", tb.ns)
		return nil
	}
	return s.checkTable(ctx, tb, name)
}

func (s *Sink) createCheckpoints(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, s.sql.createCheckpoints); err != nil {
		return fmt.Errorf("postgres sink: create checkpoint table %s: %w", s.sql.checkpoints, err)
	}
	return nil
}

// checkTable compares an existing table with the columns the mode writes
// and returns one error listing every difference.
func (s *Sink) checkTable(ctx context.Context, tb *table, name string) error {
	want := mirrorColumns
	if s.cfg.Mode == ModeAppend {
		want = appendColumns
	}
	rows, err := s.conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef OR a.attidentity <> ''
	FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, tb.sql.table)
	if err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
	}
	type have struct {
		typ              string
		notNull, defined bool
	}
	got := map[string]have{}
	var order []string
	for rows.Next() {
		var name string
		var h have
		if err := rows.Scan(&name, &h.typ, &h.notNull, &h.defined); err != nil {
			rows.Close()
			return fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
		}
		got[name] = h
		order = append(order, name)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", name, err)
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
