package config

// The pipeline files of the real connectors are tested through tide.Parse
// at the repository's root (spec*_test.go). Here package config is tested
// alone, with connectors of its own.

import (
	"errors"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// testSource is a source Config: count, with a default of 5.
type testSource struct {
	Count int `yaml:"count"`
}

func (c *testSource) Validate() error {
	if c.Count < 0 {
		return errors.New("count: must not be negative")
	}
	return nil
}

// testSink is a sink Config with a secret.
type testSink struct {
	Path  string `yaml:"path"`
	Token string `yaml:"token" secret:"whole"`
}

func (c *testSink) Validate() error {
	if c.Path == "" {
		return errors.New("path: required")
	}
	return nil
}

var testConnectors = Connectors{
	Sources: map[string]func() any{"gen": func() any { return &testSource{Count: 5} }},
	Sinks: map[string]func() any{
		"out":  func() any { return &testSink{} },
		"flat": func() any { return testSink{} }, // not a pointer: a broken registration
	},
}

// Parse decodes each section into the Config its registration makes, so
// the factory's defaults hold unless the file sets a key, even to zero.
func TestParseWithConnectors(t *testing.T) {
	p, err := Parse([]byte("name: p\nsource: {gen: }\nsink: {out: {path: x, token: '${TOK}'}}\n"), env(map[string]string{"TOK": "s3"}), testConnectors)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.Key != "gen" || p.Source.Config.(*testSource).Count != 5 {
		t.Errorf("source = %+v, want gen with the default count", p.Source)
	}
	if p.Sink.Key != "out" || *p.Sink.Config.(*testSink) != (testSink{Path: "x", Token: "s3"}) {
		t.Errorf("sink = %+v", p.Sink)
	}
	if s := p.Secrets(); len(s) != 1 || s[0] != "s3" {
		t.Errorf("Secrets = %q, want the token", s)
	}
	if w := p.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none for a token from the environment", w)
	}

	p, err = Parse([]byte("name: p\nsource: {gen: {count: 0}}\nsink: {out: {path: x}}\n"), env(nil), testConnectors)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Source.Config.(*testSource).Count; n != 0 {
		t.Errorf("count = %d, want the explicit 0", n)
	}

	for text, want := range map[string]string{
		"name: p\nsource: {gen: {count: -1}}\nsink: {out: {}}\n":   "line 2: source.gen.count: must not be negative",
		"name: p\nsource: {gen: {}}\nsink:\n  out: {}\n":           "line 4: sink.out.path: required",
		"name: p\nsource: {gne: {}}\nsink: {out: {path: x}}\n":     "line 2: source.gne: unknown key (did you mean gen?)",
		"name: p\nsource: {gen: {}}\n":                             "sink: required: set one of flat, out",
		"name: p\nsource: {gen: {}}\nsink: {flat: {path: x}}\n":    `line 3: sink.flat: the registration of sink "flat" makes a config.testSink, not a pointer to a struct`,
		"name: p\nsource: {gen: {}}\nsink: {out: {path: x}}\nx: 1": "line 4: x: unknown key",
	} {
		_, err := Parse([]byte(text), env(nil), testConnectors)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", text, err, want)
		}
	}
}

func TestValidateWithoutFile(t *testing.T) {
	p := &Pipeline{Name: "p", Source: Section{Key: "gen", Config: &testSource{Count: -1}}}
	err := p.Validate()
	for _, want := range []string{"source.gen.count: must not be negative", "sink: required", "data_dir: must not be empty", "batch.max_records: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "line ") {
		t.Errorf("Validate of a struct not from a file names lines: %v", err)
	}
}
