package config

import (
	"fmt"

	"github.com/tide-cdc/tide/sink/postgres"
)

// PostgresSink configures the PostgreSQL sink (sink.postgres): the sink's
// own Config, validated by its Validate. In a pipeline file schema
// defaults to public, mode to mirror, create_table and soft_delete to
// true, and table to the source collection's name.
type PostgresSink struct {
	postgres.Config `yaml:",inline"`
}

// Defaults of sink.postgres.
const (
	DefaultPostgresSchema = postgres.DefaultSchema
	DefaultPostgresMode   = postgres.ModeMirror
)

func (p *PostgresSink) setDefaults() {
	p.Schema = DefaultPostgresSchema
	p.Mode = DefaultPostgresMode
	p.CreateTable = true
	p.SoftDelete = true
}

func (p *PostgresSink) validate(path string) []error {
	c := p.Config
	if c.Table == "" {
		// Named after the source's collection; postgresErrors reports a
		// source without one.
		c.Table = "events"
	}
	errs := prefixed(path, c.Validate())
	// What the file spells out but the sink would take for a default.
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, key, fmt.Sprintf(format, args...)))
	}
	if p.Mode == "" {
		bad("mode", "%q is not one of mirror, append", p.Mode)
	}
	if p.Schema == "" {
		bad("schema", "must not be empty (default %s)", DefaultPostgresSchema)
	}
	if !p.SoftDelete && p.Mode == postgres.ModeAppend {
		bad("soft_delete", "applies to mirror mode only; append mode keeps every event")
	}
	return errs
}

// PostgresTable returns the table the PostgreSQL sink writes: the
// configured table, or else the source collection's name ("events" for
// the generate source, whose namespace is gen.events). A source of many
// collections gets a table per collection: "{coll}" within one database,
// "{db}_{coll}" for a cluster-wide stream.
func (p *Pipeline) PostgresTable() string {
	switch {
	case p.Sink.Postgres == nil:
		return ""
	case p.Sink.Postgres.Table != "":
		return p.Sink.Postgres.Table
	case p.Source.Mongo != nil && len(p.Source.Mongo.Collections) > 0 && p.Source.Mongo.Database != "":
		return "{coll}"
	case p.Source.Mongo != nil && len(p.Source.Mongo.Collections) > 0:
		return "{db}_{coll}"
	case p.Source.Mongo != nil:
		return p.Source.Mongo.Collection
	case p.Source.Generate != nil:
		return "events"
	}
	return ""
}

// postgresErrors returns the problems of sink.postgres that involve other
// sections. Validate appends them.
func (p *Pipeline) postgresErrors() []error {
	pg := p.Sink.Postgres
	if pg == nil {
		return nil
	}
	var errs []error
	if pg.Mode == "mirror" && p.Source.Mongo != nil {
		switch p.Source.Mongo.FullDocument {
		case "update_lookup", "required":
		case "when_available":
			errs = append(errs, fmt.Errorf("source.mongo.full_document: mirror mode (sink.postgres.mode) needs the full document of every update; "+
				"when_available may leave it out: use update_lookup or required"))
		default:
			errs = append(errs, fmt.Errorf("source.mongo.full_document: %q gives updates without their full document, and sink.postgres mirror mode needs it: "+
				"set full_document to update_lookup or required, or use mode: append", p.Source.Mongo.FullDocument))
		}
	}
	if p.PostgresTable() == "" {
		errs = append(errs, fmt.Errorf("sink.postgres.table: required with this source (it has no collection to name the table after)"))
	}
	return errs
}
