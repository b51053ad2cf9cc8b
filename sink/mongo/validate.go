package mongo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Validate reports every problem of c, joined, or nil. Each error starts
// with the YAML key it is about, as in "uri: required"; package config
// prefixes the section's path and line. Zero values are defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch uri := strings.TrimSpace(c.URI); {
	case uri == "embedded":
		// Package tide starts a second embedded server and passes its URI.
	case uri == "":
		bad("uri", "required: a MongoDB connection string such as mongodb://host:27017/?replicaSet=rs0, or embedded")
	case !strings.HasPrefix(uri, "mongodb://") && !strings.HasPrefix(uri, "mongodb+srv://"):
		bad("uri", "%q is not a MongoDB connection string (mongodb:// or mongodb+srv://)", Redact(uri))
	}
	switch c.Mode {
	case "", ModeMirror, ModeAppend:
	default:
		bad("mode", "%q is not one of %s, %s", c.Mode, ModeMirror, ModeAppend)
	}
	switch w := c.WriteConcern; {
	case w == "" || w == "majority":
	default:
		if n, err := strconv.Atoi(w); err != nil || n < 1 {
			bad("write_concern", "%q is not majority or a number of members of at least 1 (an unacknowledged write cannot be checkpointed)", w)
		}
	}
	switch c.OnWriteError {
	case "", OnWriteErrorFail, OnWriteErrorDeadLetter:
	default:
		bad("on_write_error", "%q is not one of %s, %s", c.OnWriteError, OnWriteErrorFail, OnWriteErrorDeadLetter)
	}
	for _, t := range []struct{ key, value, what string }{{"database", c.Database, "database"}, {"collection", c.Collection, "collection"}} {
		if t.value == "" {
			continue
		}
		// A template is checked when it is filled; a fixed name now.
		probe := strings.NewReplacer("{db}", "d", "{coll}", "c", "{route}", "r").Replace(t.value)
		if err := checkName(t.what, probe); err != nil {
			bad(t.key, "%q makes %v", t.value, err)
		}
	}
	if c.CheckpointDatabase != "" {
		if err := checkName("database", c.CheckpointDatabase); err != nil {
			bad("checkpoint_database", "%v", err)
		}
	}
	if c.DeadLetter != "" {
		if db, coll, ok := cutNamespace(c.DeadLetter); ok {
			if err := errors.Join(checkName("database", db), checkName("collection", coll)); err != nil {
				bad("dead_letter", "%v", err)
			}
		} else if err := checkName("collection", c.DeadLetter); err != nil {
			bad("dead_letter", "%v", err)
		}
		if c.OnWriteError != OnWriteErrorDeadLetter {
			bad("dead_letter", "is used only with on_write_error: dead_letter")
		}
	}
	return errors.Join(errs...)
}

// cutNamespace splits "db.coll".
func cutNamespace(ns string) (db, coll string, ok bool) {
	db, coll, ok = strings.Cut(ns, ".")
	return db, coll, ok && db != "" && coll != ""
}

// Redact returns uri with its password, if any, replaced by "xxxxx", for
// messages and logs.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return uri
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return uri
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
