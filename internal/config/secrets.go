package config

import (
	"fmt"
	"strings"

	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/internal/redact"
)

// MongoEmbedded configures the embedded server that uri: embedded starts
// (source.mongo.embedded).
type MongoEmbedded struct {
	// Auth makes the embedded server require authentication, and the
	// source authenticate as User with Password (SCRAM-SHA-256, against
	// admin). On a data directory without users, User is created first,
	// with the root role; afterwards it must be a user of the server's
	// admin database.
	Auth     bool   `yaml:"auth"`
	User     string `yaml:"user"`
	Password string `yaml:"password"` // write it as ${VAR}
}

func (c *MongoSource) embeddedErrors(path string) []error {
	e := c.Embedded
	if e == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.embedded%s: %s", path, field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.URI != "embedded":
		bad("", `applies to uri: embedded only; put the user and password of a MongoDB server in its uri`)
	case e.Auth && e.User == "":
		bad(".user", "required with auth: true: the user the pipeline authenticates as (created on a data directory without users)")
	case e.Auth && e.Password == "":
		bad(".password", "required with auth: true; write it as ${VAR} and set the variable in the environment")
	case !e.Auth && (e.User != "" || e.Password != ""):
		bad(".auth", "user and password are set but auth is false; set auth: true to require authentication")
	}
	return errs
}

// secretField is a key whose value is or holds a secret.
type secretField struct {
	path  string
	value string
	whole bool // the whole value is the secret; else it is a connection string
}

func (p *Pipeline) secretFields() []secretField {
	var fs []secretField
	conn := func(path, v string) { fs = append(fs, secretField{path, v, false}) }
	whole := func(path, v string) { fs = append(fs, secretField{path, v, true}) }
	natsFields := func(path string, servers []string, a natsconn.Auth) {
		for i, s := range servers {
			conn(fmt.Sprintf("%s.servers[%d]", path, i), s)
		}
		whole(path+".auth.password", a.Password)
		whole(path+".auth.token", a.Token)
	}
	if m := p.Source.Mongo; m != nil {
		conn("source.mongo.uri", m.URI)
		if m.Embedded != nil {
			whole("source.mongo.embedded.password", m.Embedded.Password)
		}
	}
	if n := p.Source.NATS; n != nil {
		natsFields("source.nats", n.Servers, n.Auth)
	}
	if n := p.Sink.NATS; n != nil {
		natsFields("sink.nats", n.Servers, n.Auth)
	}
	if n := p.CheckpointStore.NATSKV; n != nil {
		natsFields("checkpoint.nats_kv", n.Servers, n.Auth)
	}
	if pg := p.Sink.Postgres; pg != nil {
		conn("sink.postgres.dsn", pg.DSN)
	}
	if m := p.Sink.Mongo; m != nil {
		conn("sink.mongo.uri", m.URI)
	}
	return fs
}

// Secrets returns the secret values of p, as used: the passwords of its
// URIs and DSNs, NATS passwords and tokens, the embedded server's
// password. Register them with a redact.Set to keep them out of logs.
func (p *Pipeline) Secrets() []string {
	var out []string
	for _, f := range p.secretFields() {
		switch {
		case f.value == "":
		case f.whole:
			out = append(out, f.value)
		default:
			out = append(out, redact.Passwords(f.value)...)
		}
	}
	return out
}

// Warnings returns advice about p that does not make it invalid, each
// naming its key (and line): secrets written in the file itself rather
// than taken from the environment with ${VAR}. They never hold the secret.
func (p *Pipeline) Warnings() []string {
	var out []string
	for _, f := range p.secretFields() {
		text := f.value
		if raw, ok := p.raw[f.path]; ok {
			text = raw // as written, before ${VAR} was expanded
		}
		if text == "" || !inlineSecret(text, f.whole) {
			continue
		}
		what := "a password"
		switch {
		case strings.HasSuffix(f.path, ".token"):
			what = "a token"
		case f.whole:
			what = "the password"
		}
		msg := fmt.Errorf("%s: %s is written inline; write it as ${VAR} and set the variable in the environment, "+
			"so that the file can be shared and kept in version control", f.path, what)
		out = append(out, p.withLine(msg).err.Error())
	}
	return out
}

// inlineSecret reports whether text, as written in the file, holds a
// secret that is not a ${VAR} reference.
func inlineSecret(text string, whole bool) bool {
	if whole {
		return !strings.Contains(text, "${")
	}
	for _, pw := range redact.Passwords(text) {
		if !strings.Contains(pw, "${") && !strings.Contains(pw, "$%7B") {
			return true
		}
	}
	return false
}
