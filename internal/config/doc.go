// Package config turns a YAML pipeline file into typed structs: ${VAR}
// interpolation, strict decoding (unknown keys and bad values are errors
// that name the key and line), defaults and validation. It has no
// behaviour: package tide turns these structs into sources, sinks and a
// runtime. Where it can, a section is the component's own Config (yaml
// tags on its fields), and its validation is the component's Validate,
// with the section's path put in front of each key.
//
// A pipeline file:
//
//	name: gen-to-file
//	source:
//	  generate: {count: 1000000, rate: 0, payload_bytes: 100}
//	sink:
//	  file: {path: ./out/events.jsonl}
//	data_dir: ./.tide          # the checkpoint store lives here
//	batch: {max_records: 1000, max_bytes: 4MiB, commit_interval: 1s}
//	encode: {workers: 0}       # 0 = GOMAXPROCS
//
// Every scalar value may use ${VAR} (an error if VAR is unset) and
// ${VAR:-default} (the default if VAR is unset or empty); $$ is a literal
// $, and a $ before anything else is kept as it is. Interpolation happens
// after YAML parsing, inside each value, so a variable can never inject
// YAML structure, comments are never interpolated, and line numbers in
// errors are those of the file. An unquoted value is re-typed after
// interpolation (count: ${N} is a number); a quoted one stays a string.
// Inside a flow mapping such as {path: ...}, YAML ends the value at the
// first '}', so quote values that use variables there: {path: "${OUT}"}.
//
// Relative paths (data_dir, sink.file.path) are relative to the working
// directory of the tide process, not to the pipeline file.
package config
