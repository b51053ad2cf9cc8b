package config

import (
	"errors"
	"strings"
	"testing"
)

func TestPostgresSink(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	tests := map[string]struct {
		yaml  string
		want  []string // substrings of the error; none for a valid file
		table string
	}{
		"defaults": {yaml: `
name: p
source: {generate: {count: 1}}
sink: {postgres: {dsn: "postgres://u@h/db"}}
checkpoint: sink`, table: "events"},
		"mirror needs full documents": {yaml: `
name: p
source: {mongo: {database: d, collection: orders}}
sink: {postgres: {dsn: "postgres://u@h/db"}}`, want: []string{`source.mongo.full_document: "delta" gives updates without their full document`}},
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
			p, err := Parse([]byte(tc.yaml), env)
			if p != nil {
				// Until Validate calls postgresErrors itself.
				err = errors.Join(err, errors.Join(p.postgresErrors()...))
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				pg := p.Sink.Postgres
				if pg.Schema != "public" || !pg.CreateTable || !pg.SoftDelete {
					t.Errorf("defaults: %+v", pg)
				}
				if got := p.PostgresTable(); got != tc.table {
					t.Errorf("table = %q, want %q", got, tc.table)
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
		})
	}
}
