package postgres

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxFlattenDepth bounds flatten_depth: BSON nests at most 100 levels.
const maxFlattenDepth = 100

// DefaultSchema is the schema of a Config with none.
const DefaultSchema = "public"

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN-1 bytes);
// a longer one is silently truncated by the server.
const maxIdentifier = 63

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about, as in "dsn: required"; package config
// prefixes the section's path and line. Zero values are defaults and pass.
// The table is required, but not here: a pipeline file names it after the
// source's collection where it names none (FitSource), and New's sink
// checks it.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.DSN) == "" {
		bad("dsn", "required: a PostgreSQL URL such as postgres://user@host:5432/db?sslmode=disable")
	}
	switch c.Mode {
	case "", ModeMirror, ModeAppend:
	default:
		bad("mode", "%q is not one of %s, %s", c.Mode, ModeMirror, ModeAppend)
	}
	switch c.Columns {
	case "", ColumnsAuto, ColumnsDocument:
	default:
		bad("columns", "%q is not one of %s, %s", c.Columns, ColumnsAuto, ColumnsDocument)
	}
	if c.FlattenDepth < 0 || c.FlattenDepth > maxFlattenDepth {
		bad("flatten_depth", "%d is not between 0 and %d", c.FlattenDepth, maxFlattenDepth)
	}
	if len(c.ColumnTypes) > 0 && c.Columns == ColumnsDocument {
		bad("column_types", "pins typed columns, which columns: document has not")
	}
	for _, name := range slices.Sorted(maps.Keys(c.ColumnTypes)) {
		if _, err := parsePin(c.ColumnTypes[name]); err != nil {
			bad("column_types."+name, "%v", err)
		}
		if name == "" || len(name) > maxIdentifier {
			bad("column_types", "%q is not a column name", name)
		}
	}
	for _, id := range []struct{ key, value string }{{"schema", c.Schema}, {"table", c.Table}} {
		switch {
		case id.key == "table" && isTemplate(id.value):
			// Each rendered name is checked, and cut if too long, on use.
			if strings.ContainsRune(id.value, 0) {
				bad(id.key, "must not contain a NUL byte")
			}
		case len(id.value) > maxIdentifier:
			bad(id.key, "%q is longer than PostgreSQL's %d-byte identifier limit", id.value, maxIdentifier)
		case strings.ContainsRune(id.value, 0):
			bad(id.key, "must not contain a NUL byte")
		}
	}
	return errors.Join(errs...)
}
