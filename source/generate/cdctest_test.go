package generate_test

import (
	"testing"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/source/generate"
)

// TestContract runs the conformance suite. A generator's events always
// exist, so the harness makes none; a checkpoint past its count belongs
// to another generator.
func TestContract(t *testing.T) {
	cdctest.TestSource(t, cdctest.SourceHarness{
		New: func(t *testing.T) cdc.Source { return generate.New(generate.Config{Count: 1000, PayloadBytes: 10}) },
		Foreign: func(t *testing.T) *cdc.Checkpoint {
			return &cdc.Checkpoint{Source: cdc.Position(`{"seq":5000}`)}
		},
	})
}
