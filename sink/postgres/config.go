package postgres

import (
	"errors"

	"github.com/tide-cdc/tide/cdc"
)

// Batch sizes of the PostgreSQL sink where a pipeline file sets none: its
// COPY and upsert statements leave most of the server's throughput unused
// at 1000 rows (20k-50k measured best, docs/benchmarks.md).
const (
	DefaultMaxRecords = 20000
	DefaultMaxBytes   = 16 << 20
)

// DefaultConfig returns the defaults of a pipeline file's sink.postgres
// section, which a program should start from too: schema public, mirror
// mode, typed columns for a new table (flattened one level deep), the
// table created if missing, deletes kept as soft deletes. Fill
// in the DSN and the table (in a pipeline file the table defaults to the
// source collection's name).
func DefaultConfig() Config {
	return Config{Schema: DefaultSchema, Mode: ModeMirror, CreateTable: true, SoftDelete: true, FlattenDepth: DefaultFlattenDepth}
}

// BatchDefaults are the batch sizes the sink wants where the pipeline
// file sets none.
func (Config) BatchDefaults() (int, cdc.ByteSize) { return DefaultMaxRecords, DefaultMaxBytes }

// FitSource names the table after the source's collection where the file
// names none, and, for a mirror of a source whose updates may come
// without their full document, sets PartialUpdates: those are applied
// from their update description. Errors begin with their full path.
func (c *Config) FitSource(src cdc.SourceInfo) error {
	var errs []error
	if c.Table == "" {
		c.Table = src.Table
		if c.Table == "" {
			errs = append(errs, errors.New("sink.postgres.table: required with this source (it has no collection to name the table after)"))
		}
	}
	if c.Mode == ModeMirror && src.Documents && !src.FullUpdates {
		c.PartialUpdates = true
	}
	return errors.Join(errs...)
}

// CheckFormat refuses Debezium's envelope: mirror mode writes documents
// and append mode Tide's envelope columns (_op, _document_key, ...),
// which Debezium's value has not.
func (Config) CheckFormat(format string, _ bool) error {
	if format == "debezium" {
		return errors.New("debezium does not fit the PostgreSQL sink: mirror mode writes documents and append mode Tide's envelope columns (use json or canonical)")
	}
	return nil
}
