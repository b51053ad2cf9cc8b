package nats

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/internal/placeholder"
)

// DefaultConfig returns the defaults of a pipeline file's sink.nats
// section, which a program should start from too: subjects
// cdc.{db}.{coll}, 4096 publishes in flight. Fill in the stream.
func DefaultConfig() Config {
	return Config{Servers: []string{"nats://127.0.0.1:4222"}, Subject: "cdc.{db}.{coll}", MaxInFlight: 4096, MaxOutage: DefaultMaxOutage}
}

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about, as in "stream: required in jetstream
// mode"; package config prefixes the section's path and line. The zero
// value of a field is its default and passes.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if err := natsconn.Validate(c.Servers, c.Auth, c.TLS); err != nil {
		errs = append(errs, err)
	}
	if c.Stream == "" {
		bad("stream", "required")
	} else if !natsconn.ValidName(c.Stream) {
		bad("stream", "%q is not a legal stream name (no spaces, '.', '*', '>', '/' or '\\')", c.Stream)
	}
	if c.Subject != "" {
		// Check the template with every placeholder replaced by a token.
		parts, err := placeholder.Parse(c.Subject, subjectFields...)
		var b strings.Builder
		for _, p := range parts {
			if p.Field != "" {
				p.Lit = "x"
			}
			b.WriteString(p.Lit)
		}
		if s := b.String(); err != nil || strings.ContainsAny(s, "{}") {
			bad("subject", "%q has an unknown placeholder; use {%s}", c.Subject, strings.Join(subjectFields, "} {"))
		} else if !natsconn.ValidSubject(s) || strings.ContainsAny(s, "*>") {
			bad("subject", "%q is not a legal subject to publish to", c.Subject)
		}
	}
	if c.MaxInFlight < 0 {
		bad("max_in_flight", "must not be negative")
	}
	if c.MaxOutage < 0 {
		bad("max_outage", "must not be negative (0 means the default, %s)", DefaultMaxOutage)
	}
	if cs := c.CreateStream; cs != nil {
		for i, s := range cs.Subjects {
			if !natsconn.ValidSubject(s) {
				bad(fmt.Sprintf("create_stream.subjects[%d]", i), "%q is not a legal subject", s)
			}
		}
		switch cs.Storage {
		case "", "file", "memory":
		default:
			bad("create_stream.storage", "%q is not one of file, memory", cs.Storage)
		}
		if cs.Replicas < 0 || cs.Replicas > 5 {
			bad("create_stream.replicas", "%d is not between 1 and 5", cs.Replicas)
		}
		if cs.DuplicateWindow < 0 {
			bad("create_stream.duplicate_window", "must not be negative")
		}
	}
	return errors.Join(errs...)
}
