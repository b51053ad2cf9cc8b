package config

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// validator is a section that checks itself; see the conventions at the
// top of config.go. path is the section's YAML path, such as "sink.nats".
type validator interface {
	validate(path string) []error
}

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Validate returns every problem with p, joined, each naming its YAML path
// (and line, when p came from a file), or nil.
func (p *Pipeline) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}

	switch {
	case p.Name == "":
		bad("name", "required")
	case !pipelineName.MatchString(p.Name):
		bad("name", "%q is not a legal pipeline name: it names the checkpoint file, so use letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100 characters", p.Name)
	}

	errs = append(errs, p.section("source", reflect.ValueOf(&p.Source).Elem())...)
	errs = append(errs, p.section("sink", reflect.ValueOf(&p.Sink).Elem())...)
	errs = append(errs, p.postgresErrors()...)
	errs = append(errs, p.mongoSinkErrors()...)

	if strings.TrimSpace(p.DataDir) == "" {
		bad("data_dir", "must not be empty (default %s)", DefaultDataDir)
	}
	if p.Batch.MaxRecords <= 0 {
		bad("batch.max_records", "must be positive, got %d", p.Batch.MaxRecords)
	}
	if p.Batch.MaxBytes <= 0 {
		bad("batch.max_bytes", "must be positive, got %d", p.Batch.MaxBytes)
	}
	if p.Batch.CommitInterval <= 0 {
		bad("batch.commit_interval", "must be positive, got %s", p.Batch.CommitInterval)
	}
	if p.Encode.Workers < 0 {
		bad("encode.workers", "must not be negative (0 means one per CPU), got %d", p.Encode.Workers)
	}
	switch p.Encode.Format {
	case "json", "canonical":
	case "debezium":
		// Debezium's envelope holds MongoDB documents, and has no room
		// for a message's payload or for the collection operations a
		// PostgreSQL mirror applies.
		if p.Source.NATS != nil {
			bad("encode.format", "debezium writes MongoDB change events; source.nats messages have no documents (use json or canonical)")
		}
		if p.Sink.Postgres != nil {
			// Append mode's table holds Tide's envelope columns (_op,
			// _document_key, ...), which Debezium's value has not.
			bad("encode.format", "debezium does not fit the PostgreSQL sink: mirror mode writes documents and append mode Tide's envelope columns (use json or canonical)")
		}
	case "":
		bad("encode.format", "must not be empty: json, canonical or debezium")
	default:
		bad("encode.format", "%q is not one of json, canonical, debezium", p.Encode.Format)
	}
	if _, set := p.lines["encode.format"]; set && p.Sink.Mongo != nil && p.Encode.Format != "json" {
		// The MongoDB sink writes BSON documents of its own: a format
		// would be ignored.
		bad("encode.format", "the MongoDB sink writes BSON documents, not encoded envelopes: leave encode.format unset")
	}
	errs = append(errs, p.checkpointErrors()...)

	// Report in file order; problems about missing keys have no line and
	// come first.
	lined := make([]lineError, len(errs))
	for i, e := range errs {
		lined[i] = p.withLine(e)
	}
	slices.SortStableFunc(lined, func(a, b lineError) int { return cmp.Compare(a.line, b.line) })
	for i, le := range lined {
		errs[i] = le.err
	}
	return errors.Join(errs...)
}

// section checks that exactly one of the pointer fields of sel (Source or
// Sink) is set and validates it.
func (p *Pipeline) section(name string, sel reflect.Value) []error {
	var set []string
	var errs []error
	fields := yamlFields(sel)
	var keys []string
	var offered []string // what the "set one of" message lists
	for _, sf := range reflect.VisibleFields(sel.Type()) {
		key := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		keys = append(keys, key)
		if sf.Tag.Get("release") != "no" {
			offered = append(offered, key)
		}
	}
	for _, key := range keys {
		f := fields[key]
		if f.IsNil() {
			continue
		}
		set = append(set, key)
		if v, ok := f.Interface().(validator); ok {
			errs = append(errs, v.validate(name+"."+key)...)
		}
	}
	switch len(set) {
	case 0:
		errs = append(errs, fmt.Errorf("%s: required: set one of %s", name, strings.Join(offered, ", ")))
	case 1:
	default:
		errs = append(errs, fmt.Errorf("%s: %s are set; a pipeline has exactly one %s", name, strings.Join(set, " and "), name))
	}
	return errs
}

func (p *Pipeline) sinkName() string {
	fields := yamlFields(reflect.ValueOf(&p.Sink).Elem())
	for k, f := range fields {
		if !f.IsNil() {
			return k
		}
	}
	return "..."
}

type lineError struct {
	line int // 0 if unknown
	err  error
}

// withLine prefixes e with the line of the key its message starts with,
// or of the nearest enclosing key that is in the file.
func (p *Pipeline) withLine(e error) lineError {
	path, _, ok := strings.Cut(e.Error(), ": ")
	if !ok || p.lines == nil {
		return lineError{0, e}
	}
	for path != "" {
		if line, ok := p.lines[path]; ok {
			return lineError{line, fmt.Errorf("line %d: %w", line, e)}
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return lineError{0, e}
}

func (g *GenerateSource) validate(path string) []error { return prefixed(path, g.Config.Validate()) }

func (f *FileSink) validate(path string) []error { return prefixed(path, f.Config.Validate()) }

func (s *StdoutSink) validate(path string) []error { return prefixed(path, s.Config.Validate()) }

// prefixed returns the errors joined in err, each prefixed with path and
// a dot: a component's Validate names keys relative to its section
// ("stream: required"), config errors name the full YAML path
// ("source.nats.stream: required").
func prefixed(path string, err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, prefixed(path, e)...)
		}
		return errs
	}
	return []error{fmt.Errorf("%s.%w", path, err)}
}
