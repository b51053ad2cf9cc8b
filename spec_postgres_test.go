package tide

import (
	"strings"
	"testing"

	"github.com/tide-cdc/tide/sink/postgres"
)

func TestSpecPostgresSink(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		yaml   string
		want   []string // substrings of the error; none for a valid file
		reject []string // substrings the error must not hold
		table  string
		// The sink applies updates from their description.
		partial bool
	}{
		"defaults": {yaml: `
name: p
source: {generate: {count: 1}}
sink: {postgres: {dsn: "postgres://u@h/db"}}
checkpoint: sink`, table: "events"},
		"mirror takes deltas": {yaml: `
name: p
source: {mongo: {database: d, collection: orders}}
sink: {postgres: {dsn: "postgres://u@h/db"}}`, table: "orders", partial: true},
		"mirror with update_lookup": {yaml: `
name: p
source: {mongo: {database: d, collection: orders, full_document: update_lookup}}
sink: {postgres: {dsn: "postgres://u@h/db"}}`, table: "orders"},
		"a table per collection of a database": {yaml: `
name: p
source: {mongo: {database: shop, collections: ["*"], full_document: update_lookup}}
sink: {postgres: {dsn: "postgres://u@h/db"}}`, table: "{coll}"},
		"a table per namespace of a cluster": {yaml: `
name: p
source: {mongo: {collections: ["shop.*", "crm.customers"], full_document: update_lookup}}
sink: {postgres: {dsn: "postgres://u@h/db"}}`, table: "{db}_{coll}"},
		"append takes deltas": {yaml: `
name: p
source: {mongo: {database: d, collection: orders}}
sink: {postgres: {dsn: "postgres://u@h/db", mode: append, table: log}}`, table: "log"},
		"bad fields": {yaml: `
name: p
source: {generate: {count: 1}}
sink: {postgres: {mode: merge, schema: "", table: "` + strings.Repeat("t", 64) + `"}}`,
			want: []string{"sink.postgres.dsn: required", `sink.postgres.mode: "merge" is not one of mirror, append`,
				"sink.postgres.schema: must not be empty", "longer than PostgreSQL's 63-byte identifier limit"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				pg := sectionConfig[*postgres.Config](t, s.Sink, "postgres")
				if pg.Schema != "public" || !pg.CreateTable || !pg.SoftDelete {
					t.Errorf("defaults: %+v", pg)
				}
				// Where the file names no table, the sink's is named after
				// the source's collection.
				if pg.Table != tc.table {
					t.Errorf("table = %q, want %q", pg.Table, tc.table)
				}
				if pg.PartialUpdates != tc.partial {
					t.Errorf("PartialUpdates = %v, want %v", pg.PartialUpdates, tc.partial)
				}
				return
			}
			if err == nil {
				t.Fatal("valid; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			for _, w := range tc.reject {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ncontains %q", err, w)
				}
			}
		})
	}
}

// A key written empty where it has a default is refused, naming the
// default, as any section's is; soft_delete: false with mode: append is
// accepted (it has no effect there, and a program's zero Config has it).
func TestSpecPostgresExplicitEmptyValues(t *testing.T) {
	t.Parallel()
	for sink, want := range map[string]string{
		`{dsn: "postgres://u@h/db", mode: "", table: t}`:   "line 3: sink.postgres.mode: must not be empty (default mirror)",
		`{dsn: "postgres://u@h/db", schema: "", table: t}`: "line 3: sink.postgres.schema: must not be empty (default public)",
	} {
		if _, err := parseSpec("name: p\nsource: {generate: {count: 1}}\nsink: {postgres: "+sink+"}\n", nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sink.postgres %s: %v, want %q", sink, err, want)
		}
	}
	sink := `{dsn: "postgres://u@h/db", mode: append, soft_delete: false, table: t}`
	if _, err := parseSpec("name: p\nsource: {generate: {count: 1}}\nsink: {postgres: "+sink+"}\n", nil); err != nil {
		t.Errorf("sink.postgres %s: %v, want it accepted", sink, err)
	}
}
