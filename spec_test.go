package tide

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/sink/file"
	"github.com/tide-cdc/tide/sink/postgres"
	"github.com/tide-cdc/tide/sink/stdout"
	"github.com/tide-cdc/tide/source/generate"
)

// specEnv is an Options.Getenv that knows only vars.
func specEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// parseSpec parses text as tide run does, with vars for the environment.
func parseSpec(text string, vars map[string]string) (*Spec, error) {
	return Parse([]byte(text), Options{Getenv: specEnv(vars)})
}

// sectionConfig returns sec's Config as a C, failing t if sec is not the
// connector key or its Config not a C.
func sectionConfig[C Config](t *testing.T, sec Section, key string) C {
	t.Helper()
	if sec.Key != key {
		t.Fatalf("section key = %q, want %q", sec.Key, key)
	}
	c, ok := sec.Config.(C)
	if !ok {
		t.Fatalf("%s: Config is a %T, want a %T", key, sec.Config, *new(C))
	}
	return c
}

const specExample = `name: gen-to-file
source:
  generate: {count: 1000000, rate: 0, payload_bytes: 100}
sink:
  file: {path: ./out/events.jsonl}
data_dir: ./.tide          # the checkpoint store lives here
batch: {max_records: 1000, max_bytes: 4MiB, commit_interval: 1s}
encode: {workers: 0}       # 0 = GOMAXPROCS
`

func TestSpecParseGood(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		yaml  string
		vars  map[string]string
		check func(t *testing.T, s *Spec)
	}{
		"the issue's example": {specExample, nil, func(t *testing.T, s *Spec) {
			f := sectionConfig[*file.Config](t, s.Sink, "file")
			if s.Name != "gen-to-file" || s.DataDir != "./.tide" || f.Path != "./out/events.jsonl" {
				t.Errorf("got %+v, sink.file %+v", s, f)
			}
			if g := sectionConfig[*generate.Config](t, s.Source, "generate"); *g != (generate.Config{Count: 1000000, PayloadBytes: 100}) {
				t.Errorf("generate = %+v", g)
			}
			if s.Batch != (Batch{MaxRecords: 1000, MaxBytes: 4 << 20, CommitInterval: time.Second}) {
				t.Errorf("batch = %+v", s.Batch)
			}
			// The file sets no checkpoint: the data directory keeps it.
			if s.Encode != (Encode{Workers: 0, Format: "json"}) || s.Checkpoint != "file" {
				t.Errorf("encode = %+v, checkpoint = %q", s.Encode, s.Checkpoint)
			}
		}},
		"defaults": {"name: p\nsource: {generate: }\nsink: {stdout: }\n", nil, func(t *testing.T, s *Spec) {
			if s.DataDir != config.DefaultDataDir || s.Batch.MaxRecords != 1000 || s.Batch.MaxBytes != 4<<20 ||
				s.Batch.CommitInterval != time.Second || s.Encode.Format != "json" {
				t.Errorf("defaults not applied: %+v", s)
			}
			if g := sectionConfig[*generate.Config](t, s.Source, "generate"); g.PayloadBytes != 100 {
				t.Errorf("empty source section not given its defaults: %+v", g)
			}
			sectionConfig[*stdout.Config](t, s.Sink, "stdout")
		}},
		"explicit zero beats the default": {"name: p\nsource: {generate: {payload_bytes: 0}}\nsink: {stdout: {}}\n", nil, func(t *testing.T, s *Spec) {
			if g := sectionConfig[*generate.Config](t, s.Source, "generate"); g.PayloadBytes != 0 {
				t.Errorf("payload_bytes = %d, want the explicit 0", g.PayloadBytes)
			}
		}},
		"interpolation": {`name: ${NAME}
source:
  generate:
    count: ${COUNT}
    rate: ${RATE:-2.5}
    payload_bytes: ${EMPTY:-7}
sink:
  file:
    path: "${DIR}/$${literal}/a$b/$"
data_dir: ${DATA:-./.tide}-x
batch:
  max_bytes: "${SIZE}"
  commit_interval: ${EVERY:-500ms}
`, map[string]string{"NAME": "from-env", "COUNT": "42", "DIR": "/srv", "SIZE": "64MiB", "EMPTY": ""}, func(t *testing.T, s *Spec) {
			g := sectionConfig[*generate.Config](t, s.Source, "generate")
			if s.Name != "from-env" || g.Count != 42 || g.Rate != 2.5 || g.PayloadBytes != 7 {
				t.Errorf("got name %q, generate %+v", s.Name, g)
			}
			if f := sectionConfig[*file.Config](t, s.Sink, "file"); f.Path != "/srv/${literal}/a$b/$" {
				t.Errorf("path = %q", f.Path)
			}
			if s.DataDir != "./.tide-x" || s.Batch.MaxBytes != 64<<20 || s.Batch.CommitInterval != 500*time.Millisecond {
				t.Errorf("data_dir %q, batch %+v", s.DataDir, s.Batch)
			}
		}},
		"units and formats": {"name: a.b_c-1\nsource: {generate: {}}\nsink: {stdout: {}}\nbatch: {max_records: 5, max_bytes: 512KiB, commit_interval: 1m30s}\nencode: {workers: 3, format: canonical}\ncheckpoint: file\n", nil, func(t *testing.T, s *Spec) {
			if s.Batch.MaxBytes != 512<<10 || s.Batch.CommitInterval != 90*time.Second || s.Encode.Workers != 3 || s.Encode.Format != "canonical" {
				t.Errorf("got %+v %+v", s.Batch, s.Encode)
			}
			if s.Name != "a.b_c-1" || s.Batch.MaxRecords != 5 || s.Checkpoint != "file" {
				t.Errorf("name %q, max_records %d, checkpoint %q", s.Name, s.Batch.MaxRecords, s.Checkpoint)
			}
		}},
		"anchors": {"name: p\nsource: {generate: &g {count: 3}}\nsink: {stdout: {}}\nbatch: {max_records: &n 7}\nencode: {workers: *n}\n", nil, func(t *testing.T, s *Spec) {
			if g := sectionConfig[*generate.Config](t, s.Source, "generate"); g.Count != 3 || s.Encode.Workers != 7 {
				t.Errorf("got %+v %+v", g, s.Encode)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

func TestSpecParseBad(t *testing.T) {
	t.Parallel()
	base := "name: p\nsource: {generate: {}}\nsink: {stdout: {}}\n"
	tests := map[string]struct {
		yaml string
		want []string // every one must appear in the error
	}{
		"unknown key": {"name: p\nsource:\n  generate:\n    cuont: 10\nsink: {stdout: {}}\n",
			[]string{"line 4: source.generate.cuont: unknown key (did you mean count?)"}},
		"unknown top-level key":     {base + "bacth: {}\n", []string{"line 4: bacth: unknown key (did you mean batch?)"}},
		"unknown key far from any":  {base + "zzzzzzzz: 1\n", []string{"line 4: zzzzzzzz: unknown key (known keys: batch, checkpoint, data_dir, dead_letter, encode, mask_key, name, on_error, retry, sink, source, telemetry, transforms)"}},
		"key in an empty section":   {"name: p\nsource: {generate: {}}\nsink: {stdout: {color: true}}\n", []string{"line 3: sink.stdout.color: unknown key (this section takes no keys)"}},
		"bad integer":               {"name: p\nsource:\n  generate: {count: lots}\nsink: {stdout: {}}\n", []string{`line 3: source.generate.count: "lots" is not an integer`}},
		"bad float":                 {"name: p\nsource:\n  generate: {rate: fast}\nsink: {stdout: {}}\n", []string{`line 3: source.generate.rate: "fast" is not a number`}},
		"bad size":                  {base + "batch:\n  max_bytes: 4XB\n", []string{`line 5: batch.max_bytes: "4XB" is not a byte size`}},
		"fractional bytes":          {base + "batch: {max_bytes: 1.5}\n", []string{`line 4: batch.max_bytes: "1.5" is not a whole number of bytes`}},
		"duration without unit":     {base + "batch: {commit_interval: 5}\n", []string{`line 4: batch.commit_interval: "5" is not a duration`}},
		"list for a mapping":        {base + "encode: [1, 2]\n", []string{"line 4: encode: expected a mapping, got a list"}},
		"mapping for a scalar":      {"name: {a: 1}\nsource: {generate: {}}\nsink: {stdout: {}}\n", []string{"line 1: name: expected a string, got a mapping"}},
		"duplicate key":             {base + "name: q\n", []string{"line 4: name: duplicate key (first at line 1)"}},
		"unset variable":            {"name: p\nsource: {generate: {}}\nsink:\n  file: {path: '${OUT}/x'}\n", []string{"line 4: sink.file.path: environment variable OUT is not set (write ${OUT:-default} to give a default)"}},
		"bad variable":              {"name: ${1X}\nsource: {generate: {}}\nsink: {stdout: {}}\n", []string{"line 1: name: bad variable reference ${1X}"}},
		"unterminated variable":     {"name: ${X\nsource: {generate: {}}\nsink: {stdout: {}}\n", []string{"line 1: name: unterminated variable reference"}},
		"variable with a bad value": {"name: p\nsource: {generate: {count: '${N}'}}\nsink: {stdout: {}}\n", []string{`line 2: source.generate.count: "12" is not an integer`}},
		"syntax error":              {"name: p\n  source: x\n", []string{"line 2: mapping values are not allowed"}},
		"two documents":             {base + "---\nname: q\n", []string{"line 4: a pipeline file holds one YAML document"}},
		"empty":                     {"# nothing\n", []string{"empty pipeline file"}},
		"not a mapping":             {"- a\n", []string{"line 1: (top level): expected a mapping, got a list"}},
		"merge key":                 {"name: p\nsource: {generate: {<<: {count: 1}}}\nsink: {stdout: {}}\n", []string{"line 2: source.generate.<<: merge keys are not supported"}},
		"every problem at once": {"name: p\nsource:\n  generate: {cuont: 1, rate: x}\nsink: {stdout: {}}\nbatch: {max_bytes: big}\n",
			[]string{"line 3: source.generate.cuont: unknown key", `line 3: source.generate.rate: "x" is not a number`, `line 5: batch.max_bytes: "big" is not a byte size`}},

		// Validation.
		"no name":      {"source: {generate: {}}\nsink: {stdout: {}}\n", []string{"name: required"}},
		"bad name":     {"name: ../etc\nsource: {generate: {}}\nsink: {stdout: {}}\n", []string{`line 1: name: "../etc" is not a legal pipeline name`}},
		"no source":    {"name: p\nsink: {stdout: {}}\n", []string{"source: required: set one of generate, mongo, nats"}},
		"empty source": {"name: p\nsource:\nsink: {stdout: {}}\n", []string{"line 2: source: required: set one of generate, mongo, nats"}},
		"two sinks":    {"name: p\nsource: {generate: {}}\nsink:\n  stdout: {}\n  file: {path: x}\n", []string{"line 3: sink: stdout and file are set; a pipeline has exactly one sink"}},
		"no sink":      {"name: p\nsource: {generate: {}}\n", []string{"sink: required: set one of file, kafka, mongo, nats, postgres, stdout"}},
		"negative count": {"name: p\nsource:\n  generate:\n    count: -1\n    rate: -2\n    payload_bytes: -3\nsink: {stdout: {}}\n",
			[]string{"line 4: source.generate.count: must not be negative", "line 5: source.generate.rate: must be a non-negative number", "line 6: source.generate.payload_bytes: must be between 0 and"}},
		"file without path": {"name: p\nsource: {generate: {}}\nsink:\n  file: {}\n", []string{"line 4: sink.file.path: required"}},
		"batch bounds": {base + "batch: {max_records: 0, max_bytes: 0, commit_interval: 0s}\nencode: {workers: -1, format: xml}\ndata_dir: ''\n",
			[]string{"line 4: batch.max_records: must be positive, got 0", "line 4: batch.max_bytes: must be positive", "line 4: batch.commit_interval: must be positive",
				"line 5: encode.workers: must not be negative", `line 5: encode.format: "xml" is not one of json, canonical`, "line 6: data_dir: must not be empty"}},
		"checkpoint in a sink that cannot": {base + "checkpoint: sink\n", []string{`line 4: checkpoint: "sink" needs a sink that stores checkpoints in its own transaction (kafka, mongo, postgres); use "file" with sink.stdout`}},
		"unknown checkpoint":               {base + "checkpoint: nowhere\n", []string{`line 4: checkpoint: "nowhere" is not one of file, sink`}},
		"debezium from nats": {"name: p\nsource: {nats: {mode: core, subject: \"orders.*\"}}\nsink: {stdout: {}}\nencode: {format: debezium}\n",
			[]string{"line 4: encode.format: debezium writes MongoDB change events; source.nats messages have no documents"}},
		"debezium into a postgres mirror": {"name: p\nsource: {generate: {}}\nsink: {postgres: {dsn: \"postgres://u@h/db\"}}\nencode: {format: debezium}\n",
			[]string{"line 4: encode.format: debezium does not fit the PostgreSQL sink"}},
		// Append mode's table has Tide's envelope columns, which Debezium's value lacks.
		"debezium into a postgres append table": {"name: p\nsource: {generate: {}}\nsink: {postgres: {dsn: \"postgres://u@h/db\", mode: append}}\nencode: {format: debezium}\n",
			[]string{"line 4: encode.format: debezium does not fit the PostgreSQL sink"}},
		"avro into a file": {"name: p\nsource: {generate: {}}\nsink: {file: {path: x}}\nencode: {format: avro}\n",
			[]string{"line 4: encode.format: avro needs a sink that registers its schemas: sink.kafka with schema_registry"}},
		"avro without a registry": {"name: p\nsource: {generate: {}}\nsink: {kafka: {}}\nencode: {format: avro}\n",
			[]string{"line 4: encode.format: avro needs a sink that registers its schemas", "line 4: encode.format: avro needs sink.kafka.schema_registry"}},
		"a registry without avro": {"name: p\nsource: {generate: {}}\nsink: {kafka: {schema_registry: {url: \"http://r:8081\"}}}\nencode: {format: debezium}\n",
			[]string{"line 4: encode.format: debezium does not use sink.kafka.schema_registry, which is for avro"}},
		"a bad kafka topic": {"name: p\nsource: {generate: {}}\nsink:\n  kafka: {topic: \"a b.{coll}\", key: id}\n",
			[]string{`line 4: sink.kafka.topic: "a b.{coll}": "a b." cannot be part of a topic name`, `line 4: sink.kafka.key: "id" is not one of document_key, none`}},
		"a format for the mongo sink": {"name: p\nsource: {generate: {}}\nsink: {mongo: {uri: embedded, mode: append}}\nencode: {format: canonical}\n",
			[]string{"line 4: encode.format: the MongoDB sink writes BSON documents"}},
		// A connector's Config validates itself; Parse names the key and line.
		"nats section hook": {"name: p\nsource:\n  nats:\n    mode: bogus\nsink: {stdout: {}}\n", []string{"line 4: source.nats.mode:"}},
		// The MongoDB sink validates itself, naming each bad key.
		"mongo sink":             {"name: p\nsource: {generate: {}}\nsink: {mongo: {uri: 'mongodb://h', database: d, collection: c, mode: upsert}}\n", []string{`line 3: sink.mongo.mode: "upsert" is not one of mirror, append`}},
		"mongo sink incomplete":  {"name: p\nsource: {generate: {}}\nsink:\n  mongo: {uri: x}\n", []string{`line 4: sink.mongo.uri: "x" is not a MongoDB connection string`}},
		"mongo sink without uri": {"name: p\nsource: {generate: {}}\nsink:\n  mongo: {write_concern: 0}\n", []string{"sink.mongo.uri: required", `line 4: sink.mongo.write_concern: "0" is not majority`}},
		"mongo mirror of delta updates": {"name: p\nsource: {mongo: {uri: embedded, database: d, collection: c}}\nsink: {mongo: {uri: embedded}}\n",
			[]string{"source.mongo.full_document:", "sink.mongo mirror mode needs it"}},
		"mongo mirror of nats": {"name: p\nsource: {nats: {mode: core, subject: x}}\nsink: {mongo: {uri: embedded}}\n",
			[]string{"sink.mongo.mode: mirror applies MongoDB documents by _id, and source.nats messages have none"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, map[string]string{"N": "12"})
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", s)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
				}
			}
		})
	}
}

// ParseFile names the file in every error and reads ${VAR} from the
// process's environment, as tide run FILE does.
func TestSpecParseFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(path, []byte("name: p\nsource: {generate: {cuont: 1}}\nsink: {stdout: {}}\nbatch: {max_bytes: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ParseFile(path, Options{})
	for _, want := range []string{path + ": line 2: source.generate.cuont: unknown key", path + ": line 4: batch.max_bytes:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFile = %v, want it to contain %q", err, want)
		}
	}
	if _, err := ParseFile(filepath.Join(dir, "missing.yaml"), Options{}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("ParseFile of a missing file = %v", err)
	}
	t.Setenv("TIDE_TEST_OUT", "events.jsonl")
	if err := os.WriteFile(path, []byte("name: p\nsource: {generate: {}}\nsink: {file: {path: '${TIDE_TEST_OUT}'}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile(path, Options{})
	if err != nil {
		t.Fatalf("ParseFile = %v; want the variable from the environment", err)
	}
	if f := sectionConfig[*file.Config](t, s.Sink, "file"); f.Path != "events.jsonl" {
		t.Fatalf("ParseFile: sink.file.path = %q; want the variable from the environment", f.Path)
	}
}

// The PostgreSQL sink gets its own batch sizes where the file sets none;
// what the file sets stands, and other sinks keep the general defaults.
func TestSpecPostgresBatchDefaults(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml    string
		records int
		bytes   cdc.ByteSize
	}{
		"postgres, unset":        {"name: p\nsource: {generate: {}}\nsink: {postgres: {dsn: \"postgres://u@h/db\"}}\n", postgres.DefaultMaxRecords, postgres.DefaultMaxBytes},
		"postgres, records set":  {"name: p\nsource: {generate: {}}\nsink: {postgres: {dsn: \"postgres://u@h/db\"}}\nbatch: {max_records: 1000}\n", 1000, postgres.DefaultMaxBytes},
		"postgres, bytes set":    {"name: p\nsource: {generate: {}}\nsink: {postgres: {dsn: \"postgres://u@h/db\"}}\nbatch: {max_bytes: 1MiB}\n", postgres.DefaultMaxRecords, 1 << 20},
		"file keeps the default": {"name: p\nsource: {generate: {}}\nsink: {file: {path: out.jsonl}}\n", config.DefaultMaxRecords, config.DefaultMaxBytes},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := parseSpec(tc.yaml, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Batch.MaxRecords != tc.records || s.Batch.MaxBytes != tc.bytes {
				t.Fatalf("batch = %d records, %d bytes; want %d, %d", s.Batch.MaxRecords, s.Batch.MaxBytes, tc.records, tc.bytes)
			}
		})
	}
}
