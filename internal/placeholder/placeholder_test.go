package placeholder

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for tmpl, want := range map[string]string{
		"tide.{db}.{coll}": `[{tide. } { db} {. } { coll}]`,
		"{db}":             `[{ db}]`,
		"plain":            `[{plain }]`,
		"":                 `[]`,
		"a{db}{coll}b":     `[{a } { db} { coll} {b }]`,
	} {
		got, err := Parse(tmpl, "db", "coll")
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tmpl, got, err, want)
		}
	}
	for tmpl, want := range map[string]string{
		"x.{db":      `"x.{db": unclosed {`,
		"x.{table}":  `"x.{table}": unknown placeholder {table}; use {db} {coll}`,
		"x.{}":       `unknown placeholder {}`,
		"{db}{DB}.y": `unknown placeholder {DB}`,
	} {
		_, err := Parse(tmpl, "db", "coll")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want it to say %s", tmpl, err, want)
		}
	}
}
