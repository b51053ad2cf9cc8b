package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tide-cdc/tide/cdc"
)

// table is one table the sink writes.
type table struct {
	name  string // unquoted, as PostgreSQL knows it
	ns    string // the first namespace routed to it, for messages
	sql   statements
	ready bool // created or checked on this connection's server
}

// isTemplate reports whether a table name holds {db} or {coll}.
func isTemplate(name string) bool {
	return strings.Contains(name, "{db}") || strings.Contains(name, "{coll}")
}

// renderTable fills the table template with namespace ns ("db.coll"). A
// name longer than PostgreSQL's 63-byte limit is cut to 54 bytes and
// given "_" and 8 hex digits of its SHA-256, so that it stays the same
// name on every run and two long names that share their start stay
// apart, where PostgreSQL would cut both to one.
func renderTable(tmpl, ns string) (string, error) {
	db, coll, _ := strings.Cut(ns, ".")
	for _, p := range []struct{ placeholder, value, what string }{{"{db}", db, "database"}, {"{coll}", coll, "collection"}} {
		if strings.Contains(tmpl, p.placeholder) && p.value == "" {
			return "", fmt.Errorf("namespace %q has no %s name to fill %s", ns, p.what, p.placeholder)
		}
	}
	name := strings.NewReplacer("{db}", db, "{coll}", coll).Replace(tmpl)
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("namespace %q makes table name %q, which holds a NUL byte", ns, name)
	}
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("namespace %q makes table name %q, which is not UTF-8", ns, name)
	}
	return shorten(name), nil
}

// shorten returns name if it fits PostgreSQL's identifier limit, or its
// cut and hashed form.
func shorten(name string) string {
	if len(name) <= maxIdentifier {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := maxIdentifier - 9
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "_" + hex.EncodeToString(sum[:4])
}

// tableOf returns the index in s.tables of rec's table, adding it on a
// namespace's first record. It does no I/O: Commit creates or checks new
// tables.
func (s *Sink) tableOf(rec *cdc.Record) (int, error) {
	if !s.templated {
		return 0, nil
	}
	if i, ok := s.byNS[rec.Namespace]; ok {
		return i, nil
	}
	name, err := renderTable(s.cfg.Table, rec.Namespace)
	if err != nil {
		return 0, fmt.Errorf("postgres sink: table %q for the record at position %s: %w", s.cfg.Table, rec.Pos, err)
	}
	i, ok := s.byName[name]
	if !ok {
		i = len(s.tables)
		cfg := s.cfg
		cfg.Table = name
		s.tables = append(s.tables, &table{name: name, ns: rec.Namespace, sql: newStatementsFor(cfg, i)})
		s.byName[name] = i
	}
	s.byNS[rec.Namespace] = i
	return i, nil
}

// prepareTables creates or checks each table not ready yet, before the
// batch's transaction: a table is created once, even if that batch then
// fails, which is harmless, as it is created empty.
func (s *Sink) prepareTables(ctx context.Context) error {
	for _, tb := range s.tables {
		if tb.ready {
			continue
		}
		if err := s.prepareTable(ctx, tb); err != nil {
			return err
		}
		tb.ready = true
	}
	return nil
}
