// Package placeholder splits the name templates of sinks ("tide.{db}.{coll}")
// into literal text and placeholders. Each sink checks its own literal
// characters and fills the placeholders its own way: a Kafka topic and a
// NATS subject allow different characters.
package placeholder

import (
	"fmt"
	"slices"
	"strings"
)

// A Part is literal text (Field "") or a placeholder, by name.
type Part struct {
	Lit   string
	Field string
}

// Parse splits tmpl into parts; a placeholder not among fields, or a {
// not closed, is an error naming tmpl and the fields allowed.
func Parse(tmpl string, fields ...string) ([]Part, error) {
	var parts []Part
	rest := tmpl
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			parts = append(parts, Part{Lit: rest})
			break
		}
		if i > 0 {
			parts = append(parts, Part{Lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: unclosed {", tmpl)
		}
		name := rest[i+1 : i+j]
		if !slices.Contains(fields, name) {
			return nil, fmt.Errorf("%q: unknown placeholder {%s}; use {%s}", tmpl, name, strings.Join(fields, "} {"))
		}
		parts = append(parts, Part{Field: name})
		rest = rest[i+j+1:]
	}
	return parts, nil
}
