// Package config turns a YAML pipeline file into typed structs: ${VAR}
// interpolation, strict decoding (unknown keys are errors that name the key
// and line), defaults and validation. It has no behaviour: cmd/tide turns
// these structs into sources, sinks and a runtime.
package config
