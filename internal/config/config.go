package config

// Conventions for the sections in other files (mongo.go, nats.go,
// postgres.go, and any new one):
//
//   - A section is a struct whose fields carry yaml tags; the decoder
//     accepts exactly those keys (",inline" on an embedded struct merges
//     its keys; "-" hides a field). Field types may be the basic kinds,
//     slices, string-keyed maps, pointers, time.Duration, ByteSize,
//     Duration, or anything implementing yaml.Unmarshaler.
//   - Defaults: if *T has a method setDefaults(), the decoder calls it on
//     a fresh T before decoding the section's keys into it, so an explicit
//     value (even a zero) wins over the default. Alternatively leave the
//     zero value to mean the default and apply it in the component's New.
//   - Validation: if *T has a method validate(path string) []error,
//     Validate calls it for a configured section with its YAML path
//     ("source.nats") and joins the errors. Each error should begin with
//     the full path of the key it is about, then ": ", as in
//     "source.nats.stream: required"; Validate prefixes the key's line
//     when the key is in the file.

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

	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/sink/stdout"
	"github.com/tide-cdc/tide/source/generate"
)

// Pipeline is one pipeline file.
type Pipeline struct {
	// Name identifies the pipeline: it names its checkpoint and appears in
	// logs and metrics. Letters, digits, '.', '_' and '-'.
	Name   string `yaml:"name"`
	Source Source `yaml:"source"`
	Sink   Sink   `yaml:"sink"`

	// DataDir holds the checkpoint store. Default ./.tide.
	DataDir string `yaml:"data_dir"`
	Batch   Batch  `yaml:"batch"`
	Encode  Encode `yaml:"encode"`

	// Checkpoint says where checkpoints are stored: "" or "file" for the
	// store in DataDir, "sink" for the sink's own transaction (postgres,
	// mongo),
	// "nats_kv" for a NATS KV bucket. The last is written as a mapping,
	// checkpoint: {nats_kv: {...}}, which sets CheckpointStore.NATSKV.
	Checkpoint string `yaml:"checkpoint"`
	// CheckpointStore holds the mapping form of checkpoint.
	CheckpointStore CheckpointStore `yaml:"-"`

	lines map[string]int    // YAML path -> line, when parsed from a file
	raw   map[string]string // YAML path -> text before ${VAR} expansion (see Warnings)
}

// Batch bounds each batch the runtime commits.
type Batch struct {
	MaxRecords     int      `yaml:"max_records"`     // default 1000
	MaxBytes       ByteSize `yaml:"max_bytes"`       // default 4MiB
	CommitInterval Duration `yaml:"commit_interval"` // default 1s
}

// Encode configures the encode stage.
type Encode struct {
	Workers int    `yaml:"workers"` // 0 means GOMAXPROCS
	Format  string `yaml:"format"`  // json (relaxed Extended JSON; default) | canonical | debezium
}

// Source selects the pipeline's source: exactly one field is set.
type Source struct {
	Generate *GenerateSource `yaml:"generate"`
	Mongo    *MongoSource    `yaml:"mongo"`
	NATS     *NATSSource     `yaml:"nats"`
}

// Sink selects the pipeline's sink: exactly one field is set.
type Sink struct {
	File     *FileSink     `yaml:"file"`
	Stdout   *StdoutSink   `yaml:"stdout"`
	NATS     *NATSSink     `yaml:"nats"`
	Postgres *PostgresSink `yaml:"postgres"`
	Mongo    *MongoSink    `yaml:"mongo"`
}

// GenerateSource configures the synthetic source (source.generate): the
// source's own Config, validated by its Validate. payload_bytes defaults
// to 100.
type GenerateSource struct {
	generate.Config `yaml:",inline"`
}

// FileSink configures the JSON-lines file sink (sink.file): the sink's own
// Config (path, required), validated by its Validate.
type FileSink struct {
	file.Config `yaml:",inline"`
}

// StdoutSink configures the stdout sink (sink.stdout). It has no options;
// "stdout: {}" selects it.
type StdoutSink struct {
	stdout.Config `yaml:",inline"`
}

// Defaults.
const (
	DefaultDataDir        = "./.tide"
	DefaultMaxRecords     = 1000
	DefaultMaxBytes       = 4 << 20
	DefaultCommitInterval = Duration(time.Second)
	DefaultPayloadBytes   = 100
)

func (p *Pipeline) setDefaults() {
	p.DataDir = DefaultDataDir
	p.Batch = Batch{MaxRecords: DefaultMaxRecords, MaxBytes: DefaultMaxBytes, CommitInterval: DefaultCommitInterval}
	p.Encode = Encode{Format: "json"}
}

func (g *GenerateSource) setDefaults() { g.PayloadBytes = DefaultPayloadBytes }

// Batch sizes of the PostgreSQL sink when the file sets none: its COPY
// and upsert statements leave most of the server's throughput unused at
// 1000 rows (20k–50k measured best, docs/benchmarks.md).
const (
	PostgresMaxRecords = 20000
	PostgresMaxBytes   = 16 << 20
)

// sinkBatchDefaults gives the batch the sink's own defaults where the
// pipeline file leaves batch.max_records or batch.max_bytes unset.
func (p *Pipeline) sinkBatchDefaults() {
	if p.Sink.Postgres == nil {
		return
	}
	if _, set := p.lines["batch.max_records"]; !set {
		p.Batch.MaxRecords = PostgresMaxRecords
	}
	if _, set := p.lines["batch.max_bytes"]; !set {
		p.Batch.MaxBytes = PostgresMaxBytes
	}
}

type defaulter interface{ setDefaults() }

// setDefaults calls setDefaults on p, a pointer, if it has the method.
func setDefaults(p reflect.Value) {
	if d, ok := p.Interface().(defaulter); ok {
		d.setDefaults()
	}
}

// Load reads and parses a pipeline file, taking variables from the
// environment. Every error names the file. It reads only a regular file of
// at most MaxFileBytes.
func Load(path string) (*Pipeline, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseNamed(path, data, os.LookupEnv)
}

// ReadFile reads a pipeline file: a regular file of at most MaxFileBytes.
func ReadFile(path string) ([]byte, error) { return readPipelineFile(path) }

// ParseNamed is Parse with every error prefixed by name, the file's path.
func ParseNamed(name string, data []byte, getenv func(string) (string, bool)) (*Pipeline, error) {
	p, err := Parse(data, getenv)
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
// as os.LookupEnv does. The error joins every problem found, each naming
// its line and YAML path. A document whose aliases expand beyond MaxNodes
// values is refused before anything is decoded.
func Parse(data []byte, getenv func(string) (string, bool)) (*Pipeline, error) {
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

	p := &Pipeline{}
	p.setDefaults()
	d := &decoder{getenv: getenv, lines: map[string]int{}, raw: map[string]string{}}
	d.value(doc, reflect.ValueOf(p).Elem(), "")
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	p.lines, p.raw = d.lines, d.raw
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
