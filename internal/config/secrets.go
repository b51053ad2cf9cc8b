package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/tide-cdc/tide/internal/redact"
)

// secretField is a key whose value is or holds a secret.
type secretField struct {
	path  string
	value string
	whole bool // the whole value is the secret; else it is a connection string
}

// secretFields finds the secrets of p by their fields' secret tags:
// secret:"whole" for a password or token, secret:"uri" for a connection
// string (or a list of them) that may hold one.
func (p *Pipeline) secretFields() []secretField {
	var fs []secretField
	walkSecrets(reflect.ValueOf(p).Elem(), "", "", &fs)
	// The mapping form of checkpoint is decoded beside the key.
	walkSecrets(reflect.ValueOf(p.CheckpointStore), "checkpoint", "", &fs)
	return fs
}

// walkSecrets appends the tagged strings under v, at path, to fs. tag is
// the secret tag of the field v came from, if any.
func walkSecrets(v reflect.Value, path, tag string, fs *[]secretField) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			walkSecrets(v.Elem(), path, tag, fs)
		}
	case reflect.String:
		if tag != "" {
			*fs = append(*fs, secretField{path, v.String(), tag == "whole"})
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkSecrets(v.Index(i), fmt.Sprintf("%s[%d]", path, i), tag, fs)
		}
	case reflect.Struct:
		if v.Type() == sectionType {
			sec := v.Interface().(Section)
			if sec.Config != nil {
				walkSecrets(reflect.ValueOf(sec.Config), joinPath(path, sec.Key), "", fs)
			}
			return
		}
		for _, f := range yamlFieldsTagged(v) {
			walkSecrets(f.value, joinPath(path, f.key), f.secret, fs)
		}
	}
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
