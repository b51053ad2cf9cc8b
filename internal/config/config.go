package config

// Conventions for a section (a connector's Config, and the few sections of
// this package):
//
//   - A section is a struct whose fields carry yaml tags; the decoder
//     accepts exactly those keys (",inline" on an embedded struct merges
//     its keys; "-" hides a field). Field types may be the basic kinds,
//     slices, string-keyed maps, pointers, time.Duration, anything
//     implementing encoding.TextUnmarshaler (cdc.ByteSize) or
//     yaml.Unmarshaler.
//   - Defaults: a connector's section is decoded into the Config its
//     registration makes (the connector's DefaultConfig), so an explicit
//     value, even a zero, wins over the default.
//   - Validation: the connector's Validate; each error begins with the key
//     it is about, relative to the section ("stream: required"), and
//     Parse puts the section's path and the key's line in front.
//   - Secrets: a field tagged secret:"whole" holds a secret, one tagged
//     secret:"uri" a connection string whose password is one.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/transform"
)

// Pipeline is one pipeline file.
type Pipeline struct {
	// Name identifies the pipeline: it names its checkpoint and appears in
	// logs and metrics. Letters, digits, '.', '_' and '-'.
	Name   string  `yaml:"name"`
	Source Section `yaml:"source"`
	Sink   Section `yaml:"sink"`

	// DataDir holds the checkpoint store. Default ./.tide.
	DataDir string `yaml:"data_dir"`
	Batch   Batch  `yaml:"batch"`
	Encode  Encode `yaml:"encode"`
	// Retry is how the source and the sink retry transient errors.
	Retry Retry `yaml:"retry"`
	// Telemetry configures tracing; off by default.
	Telemetry Telemetry `yaml:"telemetry"`

	// Checkpoint says where checkpoints are stored: "" or "file" for the
	// store in DataDir, "sink" for the sink's own transaction, "nats_kv"
	// for a NATS KV bucket. The last is written as a mapping,
	// checkpoint: {nats_kv: {...}}, which sets CheckpointStore.NATSKV.
	Checkpoint string `yaml:"checkpoint"`
	// CheckpointStore holds the mapping form of checkpoint.
	CheckpointStore CheckpointStore `yaml:"-"`

	// Transforms are applied in order to each change (transforms.go).
	Transforms []Transform `yaml:"transforms"`
	// MaskKey is the key of mask_fields' hash.
	MaskKey string `yaml:"mask_key" secret:"whole"`
	// OnError is fail (default), skip or dead_letter.
	OnError string `yaml:"on_error"`
	// DeadLetter is where dead letters go, for a sink that does not keep
	// them itself.
	DeadLetter DeadLetter `yaml:"dead_letter"`
	// Chain is the compiled Transforms, set by Validate; nil when none.
	Chain *transform.Chain `yaml:"-"`

	lines map[string]int    // YAML path -> line, when parsed from a file
	raw   map[string]string // YAML path -> text before ${VAR} expansion (see Warnings)
	conns Connectors        // what source and sink may name
	late  []error           // the decoder's problems that Validate reports
}

// Section is the source or the sink of a pipeline: the key it is
// registered under and its Config, decoded from the file.
type Section struct {
	Key    string
	Config any // a pointer, as the registration's factory made it
}

// Connectors are the registered sources and sinks: each key's function
// returns a new Config, a pointer holding the connector's defaults.
type Connectors struct {
	Sources map[string]func() any
	Sinks   map[string]func() any
}

// Batch bounds each batch the runtime commits.
type Batch struct {
	MaxRecords     int           `yaml:"max_records"`     // default 1000, or the sink's
	MaxBytes       cdc.ByteSize  `yaml:"max_bytes"`       // default 4MiB, or the sink's
	CommitInterval time.Duration `yaml:"commit_interval"` // default 1s
}

// Encode configures the encode stage.
type Encode struct {
	Workers int    `yaml:"workers"` // 0 means GOMAXPROCS
	Format  string `yaml:"format"`  // json (relaxed Extended JSON; default) | canonical | debezium | avro
}

// Defaults of the sections that are not a connector's.
const (
	DefaultDataDir        = "./.tide"
	DefaultMaxRecords     = 1000
	DefaultMaxBytes       = 4 << 20
	DefaultCommitInterval = time.Second
)

func (p *Pipeline) setDefaults() {
	p.DataDir = DefaultDataDir
	p.Batch = Batch{MaxRecords: DefaultMaxRecords, MaxBytes: DefaultMaxBytes, CommitInterval: DefaultCommitInterval}
	p.Encode = Encode{Format: "json"}
	p.Retry = Retry{Initial: DefaultRetryInitial, Max: DefaultRetryMax}
}

// A BatchDefaulter is a sink Config with batch sizes of its own, used
// where the file sets none (the PostgreSQL sink's COPY wants 20,000 rows).
type BatchDefaulter interface {
	BatchDefaults() (maxRecords int, maxBytes cdc.ByteSize)
}

// sinkBatchDefaults gives the batch the sink's own defaults where the
// pipeline file leaves batch.max_records or batch.max_bytes unset.
func (p *Pipeline) sinkBatchDefaults() {
	d, ok := p.Sink.Config.(BatchDefaulter)
	if !ok {
		return
	}
	records, bytes := d.BatchDefaults()
	if _, set := p.lines["batch.max_records"]; !set && records > 0 {
		p.Batch.MaxRecords = records
	}
	if _, set := p.lines["batch.max_bytes"]; !set && bytes > 0 {
		p.Batch.MaxBytes = bytes
	}
}

// ReadFile reads a pipeline file: a regular file of at most MaxFileBytes.
func ReadFile(path string) ([]byte, error) { return readPipelineFile(path) }

// ParseNamed is Parse with every error prefixed by name, the file's path.
func ParseNamed(name string, data []byte, getenv func(string) (string, bool), conns Connectors) (*Pipeline, error) {
	p, err := Parse(data, getenv, conns)
	if err != nil && name != "" {
		errs := unjoin(err)
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s: %w", name, e)
		}
		return nil, errors.Join(errs...)
	}
	return p, err
}

// Parse decodes and validates a pipeline file. getenv looks variables up,
// as os.LookupEnv does; conns are the connectors a source or sink may
// name. The error joins every problem found, each naming its line and
// YAML path. A document whose aliases expand beyond MaxNodes values is
// refused before anything is decoded.
func Parse(data []byte, getenv func(string) (string, bool), conns Connectors) (*Pipeline, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty pipeline file")
		}
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, fmt.Errorf("line %d: a pipeline file holds one YAML document; found a second one", line)
	}
	if err := checkExpansion(&root); err != nil {
		return nil, err
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, errors.New("empty pipeline file")
		}
		doc = doc.Content[0]
	}
	if isNull(doc) {
		return nil, errors.New("empty pipeline file")
	}

	p := &Pipeline{conns: conns}
	p.setDefaults()
	d := &decoder{getenv: getenv, lines: map[string]int{}, raw: map[string]string{}, conns: conns}
	d.value(doc, reflect.ValueOf(p).Elem(), "")
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	p.lines, p.raw, p.late = d.lines, d.raw, d.late
	p.sinkBatchDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return append([]error(nil), j.Unwrap()...)
	}
	return []error{err}
}
