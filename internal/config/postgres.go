package config

import (
	"fmt"
	"strings"
)

// PostgresSink configures the PostgreSQL sink (sink.postgres).
type PostgresSink struct {
	// DSN is a libpq connection string or URL,
	// postgres://user@host:port/db?sslmode=... Required.
	DSN string `yaml:"dsn"`
	// Schema holds the table and, with checkpoint: sink, tide_checkpoints.
	// Default public.
	Schema string `yaml:"schema"`
	// Table is the table written. Default: the source collection's name.
	Table string `yaml:"table"`
	// Mode is mirror (one row per document, upserted) or append (one row
	// per event). Default mirror.
	Mode string `yaml:"mode"`
	// CreateTable creates the table when it is missing. Default true.
	CreateTable bool `yaml:"create_table"`
	// SoftDelete marks a deleted document's row (_tide_deleted) instead of
	// deleting it, in mirror mode. Default true.
	SoftDelete bool `yaml:"soft_delete"`
}

// Defaults of sink.postgres.
const (
	DefaultPostgresSchema = "public"
	DefaultPostgresMode   = "mirror"
)

func (p *PostgresSink) setDefaults() {
	p.Schema = DefaultPostgresSchema
	p.Mode = DefaultPostgresMode
	p.CreateTable = true
	p.SoftDelete = true
}

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN-1 bytes);
// a longer one is silently truncated by the server.
const maxIdentifier = 63

func (p *PostgresSink) validate(path string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, key, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(p.DSN) == "" {
		bad("dsn", "required: a PostgreSQL URL such as postgres://user@host:5432/db?sslmode=disable")
	}
	switch p.Mode {
	case "mirror", "append":
	default:
		bad("mode", "%q is not one of mirror, append", p.Mode)
	}
	for _, id := range []struct{ key, value string }{{"schema", p.Schema}, {"table", p.Table}} {
		switch {
		case id.key == "schema" && p.Schema == "":
			bad("schema", "must not be empty (default %s)", DefaultPostgresSchema)
		case len(id.value) > maxIdentifier:
			bad(id.key, "%q is longer than PostgreSQL's %d-byte identifier limit", id.value, maxIdentifier)
		case strings.ContainsRune(id.value, 0):
			bad(id.key, "must not contain a NUL byte")
		}
	}
	if !p.SoftDelete && p.Mode == "append" {
		bad("soft_delete", "applies to mirror mode only; append mode keeps every event")
	}
	return errs
}

// PostgresTable returns the table the PostgreSQL sink writes: the
// configured table, or else the source collection's name ("events" for
// the generate source, whose namespace is gen.events).
func (p *Pipeline) PostgresTable() string {
	switch {
	case p.Sink.Postgres == nil:
		return ""
	case p.Sink.Postgres.Table != "":
		return p.Sink.Postgres.Table
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
