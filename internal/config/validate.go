package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tide-cdc/tide/cdc"
)

// The abilities a connector's Config may have for the rules that span
// sections. Each is found by type assertion; package tide documents them.
type (
	validator interface{ Validate() error }
	// describer is a source Config that says what its records are.
	describer interface{ Describe() cdc.SourceInfo }
	// sourceFitter is a sink Config whose defaults or checks depend on
	// the source (a table named after the collection; a mirror that
	// needs full documents). Its errors begin with their full path.
	sourceFitter interface{ FitSource(cdc.SourceInfo) error }
	// formatChecker is a sink Config that takes only some encodings.
	formatChecker interface {
		CheckFormat(format string, explicit bool) error
	}
	// avroWriter is a sink Config that writes encode.format: avro
	// itself, registering its schemas (sink.kafka with a schema
	// registry).
	avroWriter interface{ WritesAvro() bool }
)

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// SourceInfo returns what the source tells about its records; a source
// Config that says nothing is taken for one of documents without updates.
func (p *Pipeline) SourceInfo() cdc.SourceInfo {
	if d, ok := p.Source.Config.(describer); ok {
		info := d.Describe()
		if info.Section == "" {
			info.Section = "source." + p.Source.Key
		}
		return info
	}
	return cdc.SourceInfo{Section: "source." + p.Source.Key}
}

// KeepsCheckpoints reports whether the sink can keep the checkpoint in
// its own transactions.
func (p *Pipeline) KeepsCheckpoints() bool {
	_, ok := p.Sink.Config.(cdc.CheckpointTable)
	return ok
}

// Validate returns every problem with p, joined, each naming its YAML path
// (and line, when p came from a file), or nil. It also gives the sink the
// defaults that depend on the source (FitSource).
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

	errs = append(errs, p.section("source", p.Source)...)
	errs = append(errs, p.section("sink", p.Sink)...)
	if p.Source.Key != "" {
		if f, ok := p.Sink.Config.(sourceFitter); ok {
			if err := f.FitSource(p.SourceInfo()); err != nil {
				errs = append(errs, unjoin(err)...)
			}
		}
	}

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
		// Debezium's envelope holds MongoDB documents.
		if info := p.SourceInfo(); p.Source.Key != "" && !info.Documents {
			bad("encode.format", "debezium writes MongoDB change events; %s messages have no documents (use json or canonical)", info.Section)
		}
	case "avro":
		// Debezium's envelope as Avro, with schemas in a registry.
		if info := p.SourceInfo(); p.Source.Key != "" && !info.Documents {
			bad("encode.format", "avro writes Debezium's MongoDB change events; %s messages have no documents (use json or canonical)", info.Section)
		}
		if w, ok := p.Sink.Config.(avroWriter); p.Sink.Key != "" && (!ok || !w.WritesAvro()) {
			bad("encode.format", "avro needs a sink that registers its schemas: sink.kafka with schema_registry")
		}
	case "":
		bad("encode.format", "must not be empty: json, canonical, debezium or avro")
	default:
		bad("encode.format", "%q is not one of json, canonical, debezium, avro", p.Encode.Format)
	}
	if c, ok := p.Sink.Config.(formatChecker); ok {
		_, explicit := p.lines["encode.format"]
		if err := c.CheckFormat(p.Encode.Format, explicit); err != nil {
			bad("encode.format", "%v", err)
		}
	}
	errs = append(errs, p.checkpointErrors()...)
	errs = append(errs, p.transformErrors()...)
	errs = append(errs, p.opsErrors()...)
	errs = append(errs, p.late...)
	return p.withLines(errs)
}

// withLines puts the line of each error's key in front of it, and sorts
// them in file order; problems about missing keys have no line and come
// first.
func (p *Pipeline) withLines(errs []error) error {
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

// section checks that a source or sink is set and validates its Config.
func (p *Pipeline) section(name string, s Section) []error {
	if s.Key == "" {
		return []error{fmt.Errorf("%s: required: set one of %s", name, strings.Join(p.offered(name), ", "))}
	}
	if v, ok := s.Config.(validator); ok {
		return prefixed(name+"."+s.Key, v.Validate())
	}
	return nil
}

// offered lists the registered keys of a section, for messages.
func (p *Pipeline) offered(name string) []string {
	m := p.conns.Sources
	if name == "sink" {
		m = p.conns.Sinks
	}
	return slices.Sorted(maps.Keys(m))
}

type lineError struct {
	line int // 0 if unknown
	err  error
}

// withLine prefixes e with the line of the key its message starts with,
// or of the nearest enclosing key that is in the file.
func (p *Pipeline) withLine(e error) lineError {
	if le, ok := e.(*exprLineError); ok {
		return lineError{le.line, fmt.Errorf("line %d: %w", le.line, le.err)}
	}
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
