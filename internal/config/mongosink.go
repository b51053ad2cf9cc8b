package config

import (
	"fmt"

	mongosink "github.com/tide-cdc/tide/sink/mongo"
)

// MongoSink configures the MongoDB sink (sink.mongo): the sink's own
// Config, validated by its Validate. uri: embedded starts a second
// embedded server, with its data under data_dir/embedded-sink.
type MongoSink struct {
	mongosink.Config `yaml:",inline"`
}

func (m *MongoSink) setDefaults() {
	m.Database, m.Collection = mongosink.DefaultDatabase, mongosink.DefaultCollection
	m.Mode, m.WriteConcern = mongosink.ModeMirror, mongosink.DefaultWriteConcern
	m.OnWriteError, m.CheckpointDatabase = mongosink.OnWriteErrorFail, mongosink.DefaultCheckpointDatabase
}

func (m *MongoSink) validate(path string) []error {
	c := m.Config
	if c.URI == "embedded" {
		c.URI = "mongodb://embedded" // started by tide; checked like any other
	}
	errs := prefixed(path, c.Validate())
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", path, key, fmt.Sprintf(format, args...)))
	}
	// What the file spells out empty but the sink would take for a default.
	for _, k := range []struct{ key, value string }{{"database", m.Database}, {"collection", m.Collection}, {"mode", m.Mode},
		{"write_concern", m.WriteConcern}, {"on_write_error", m.OnWriteError}, {"checkpoint_database", m.CheckpointDatabase}} {
		if k.value == "" {
			bad(k.key, "must not be empty")
		}
	}
	return errs
}

// mongoSinkErrors returns the problems of sink.mongo that involve other
// sections. Validate appends them.
func (p *Pipeline) mongoSinkErrors() []error {
	m := p.Sink.Mongo
	if m == nil || m.Mode != mongosink.ModeMirror {
		return nil
	}
	var errs []error
	switch {
	case p.Source.Mongo != nil:
		switch p.Source.Mongo.FullDocument {
		case "update_lookup", "required":
		case "when_available":
			errs = append(errs, fmt.Errorf("source.mongo.full_document: mirror mode (sink.mongo.mode) needs the full document of every update; "+
				"when_available may leave it out: use update_lookup or required"))
		default:
			errs = append(errs, fmt.Errorf("source.mongo.full_document: %q gives updates without their full document, and sink.mongo mirror mode needs it: "+
				"set full_document to update_lookup or required, or use mode: append", p.Source.Mongo.FullDocument))
		}
	case p.Source.NATS != nil:
		errs = append(errs, fmt.Errorf("sink.mongo.mode: mirror applies MongoDB documents by _id, and source.nats messages have none: use mode: append"))
	}
	return errs
}
