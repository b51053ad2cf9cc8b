package postgres

import (
	"context"
	"fmt"
	"strings"
)

// prepareSchema creates the checkpoint table (when the sink keeps the
// checkpoint) and
// the table if missing and allowed, then checks the table's columns.
func (s *Sink) prepareSchema(ctx context.Context) error {
	if s.keepsCheckpoint() {
		if err := s.createCheckpoints(ctx); err != nil {
			return err
		}
	}
	var exists bool
	if err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.sql.table).Scan(&exists); err != nil {
		return fmt.Errorf("postgres sink: look up table %s: %w", s.sql.table, err)
	}
	if !exists {
		if !s.cfg.CreateTable {
			return fmt.Errorf("postgres sink: table %s does not exist, and create_table is false: create it or set create_table: true", s.sql.table)
		}
		if _, err := s.conn.Exec(ctx, s.sql.createTable); err != nil {
			return fmt.Errorf("postgres sink: create table %s: %w", s.sql.table, err)
		}
		s.log.Info("created table", "mode", s.cfg.Mode)
		return nil
	}
	return s.checkTable(ctx)
}

func (s *Sink) createCheckpoints(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, s.sql.createCheckpoints); err != nil {
		return fmt.Errorf("postgres sink: create checkpoint table %s: %w", s.sql.checkpoints, err)
	}
	return nil
}

// checkTable compares an existing table with the columns the mode writes
// and returns one error listing every difference.
func (s *Sink) checkTable(ctx context.Context) error {
	want := mirrorColumns
	if s.cfg.Mode == ModeAppend {
		want = appendColumns
	}
	rows, err := s.conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef OR a.attidentity <> ''
	FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, s.sql.table)
	if err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", s.sql.table, err)
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
			return fmt.Errorf("postgres sink: read columns of %s: %w", s.sql.table, err)
		}
		got[name] = h
		order = append(order, name)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", s.sql.table, err)
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
		AND i.indexprs IS NULL AND a.attname = '_id')`, s.sql.table).Scan(&unique)
		if err != nil {
			return fmt.Errorf("postgres sink: read indexes of %s: %w", s.sql.table, err)
		}
		if !unique {
			diffs = append(diffs, "column _id has no primary key or unique index: mirror mode upserts by _id")
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("postgres sink: table %s is not compatible with %s mode: %s",
			s.sql.table, s.cfg.Mode, strings.Join(diffs, "; "))
	}
	return nil
}
