package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// Layout describes, for tide validate, how the sink would write each of
// its tables that exists: typed columns (each with the field path it
// holds and the BSON types seen in it), or the document layout; and what
// a missing table becomes. With {db} or {coll} in the table name, the
// tables are those tide_columns records. It only reads.
func (c Config) Layout(ctx context.Context) (string, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		return "", fmt.Errorf("postgres sink: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	columns := pgx.Identifier{c.Schema, columnsTable}.Sanitize()
	var haveColumns bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, columns).Scan(&haveColumns); err != nil {
		return "", fmt.Errorf("postgres sink: look up %s: %w", columns, err)
	}
	names := []string{c.Table}
	var b strings.Builder
	if isTemplate(c.Table) {
		names = nil
		if haveColumns {
			rows, err := conn.Query(ctx, `SELECT DISTINCT table_name FROM `+columns+` ORDER BY 1`)
			if err == nil {
				names, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				return "", fmt.Errorf("postgres sink: read %s: %w", columns, err)
			}
		}
		fmt.Fprintf(&b, "sink.postgres table %q: a table per namespace; %d typed so far\n", c.Table, len(names))
	}
	for _, name := range names {
		if err := describeTable(ctx, conn, c, name, columns, haveColumns, &b); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func describeTable(ctx context.Context, conn *pgx.Conn, c Config, name, columns string, haveColumns bool, b *strings.Builder) error {
	table := pgx.Identifier{c.Schema, name}.Sanitize()
	rows, err := conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
	WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
	if err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", table, err)
	}
	type col struct{ name, typ string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (col, error) {
		var cl col
		return cl, r.Scan(&cl.name, &cl.typ)
	})
	if err != nil {
		return fmt.Errorf("postgres sink: read columns of %s: %w", table, err)
	}
	typed := false
	for _, cl := range cols {
		typed = typed || cl.name == overflowColumn
	}
	switch {
	case len(cols) == 0 && c.Columns != ColumnsDocument:
		fmt.Fprintf(b, "table %s: does not exist; made on its first row with typed columns (columns: auto, flatten_depth %d)\n", table, c.FlattenDepth)
		return nil
	case len(cols) == 0:
		fmt.Fprintf(b, "table %s: does not exist; made on its first row with the document layout\n", table)
		return nil
	case !typed:
		fmt.Fprintf(b, "table %s: exists with the document layout (%s mode), which it keeps\n", table, c.Mode)
		return nil
	}
	type rec struct {
		path  string
		types []string
		notes []string
	}
	recs := map[string]*rec{}
	if haveColumns {
		rows, err := conn.Query(ctx, `SELECT column_name, array_to_string(path, '.'), bson_type, decision, note FROM `+columns+`
		WHERE table_name = $1 ORDER BY seen_at, column_name`, name)
		if err != nil {
			return fmt.Errorf("postgres sink: read %s: %w", columns, err)
		}
		for rows.Next() {
			var cname, path, bsonType, decision, note string
			if err := rows.Scan(&cname, &path, &bsonType, &decision, &note); err != nil {
				rows.Close()
				return fmt.Errorf("postgres sink: read %s: %w", columns, err)
			}
			r := recs[cname]
			if r == nil {
				r = &rec{path: path}
				recs[cname] = r
			}
			entry := bsonType
			if decision != "added" && decision != "key" {
				entry += " " + decision
			}
			r.types = append(r.types, entry)
			if note != "" && !strings.HasPrefix(note, "does not fit") {
				r.notes = append(r.notes, note)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres sink: read %s: %w", columns, err)
		}
	}
	fmt.Fprintf(b, "table %s: exists with typed columns, which it keeps (%d columns of PostgreSQL's %d)\n", table, len(cols), maxColumns)
	w := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  COLUMN\tTYPE\tFIELD\tBSON TYPES SEEN")
	for _, cl := range cols {
		r := recs[cl.name]
		switch {
		case cl.name == overflowColumn:
			fmt.Fprintf(w, "  %s\t%s\t-\tvalues that fit no column\n", cl.name, cl.typ)
		case r == nil && isSystemColumn(cl.name):
			fmt.Fprintf(w, "  %s\t%s\t-\ttide's own\n", cl.name, cl.typ)
		case r == nil:
			fmt.Fprintf(w, "  %s\t%s\t-\tnot tide's: left alone\n", cl.name, cl.typ)
		default:
			types := strings.Join(r.types, ", ")
			if len(r.notes) > 0 {
				sort.Strings(r.notes)
				types += "; " + strings.Join(r.notes, "; ")
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", cl.name, cl.typ, r.path, types)
		}
	}
	if err := w.Flush(); err != nil {
		return errors.New("postgres sink: layout: " + err.Error())
	}
	return nil
}

func isSystemColumn(name string) bool {
	for _, c := range typedSystem {
		if c.name == name {
			return true
		}
	}
	return false
}
