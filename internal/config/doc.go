// Package config turns the YAML text of a pipeline file into the Config
// structs of its connectors: ${VAR} interpolation, strict decoding
// (unknown keys and bad values are errors that name the key and line),
// and the rules that span sections. It knows no connector: package tide
// passes it the registered ones (Connectors), each section is decoded
// into the Config its registration makes (with the connector's defaults),
// its validation is the connector's Validate with the section's path put
// in front of each key, and the cross-section rules go through optional
// methods of those Configs (Describe, FitSource, BatchDefaults,
// CheckFormat, cdc.CheckpointTable). It has no behaviour: package tide
// builds the pipeline.
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
