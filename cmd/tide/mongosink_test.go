package main

import (
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/testenv"
)

// TestMongoSinkCheckpointCommands: tide run of generate → MongoDB with
// checkpoint: sink, then tide checkpoint show reads the checkpoint from
// the target, and reset says which document to delete instead.
func TestMongoSinkCheckpointCommands(t *testing.T) {
	t.Parallel()
	srv := testenv.MongoWire(t)
	dir := t.TempDir()
	cfg := writePipeline(t, dir, `
name: gen-mongo
source:
  generate: {count: 1200}
sink:
  mongo: {uri: "`+srv.URI()+`", mode: append, database: lake, collection: events}
checkpoint: sink
`)
	if out, err := runTide(t, dir, "run", "-f", cfg, "--progress", "never"); err != nil {
		t.Fatalf("tide run: %v\n%s", err, out)
	}
	out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg)
	if err != nil || !strings.Contains(out, `"seq":1200`) && !strings.Contains(out, `"seq": 1200`) {
		t.Fatalf("tide checkpoint show: %v\n%s", err, out)
	}
	out, err = runTide(t, dir, "checkpoint", "reset", "-f", cfg, "--yes")
	if err != nil || !strings.Contains(out, `checkpoint of pipeline "gen-mongo" reset in the tide_checkpoints table of sink.mongo`) {
		t.Fatalf("tide checkpoint reset: %v\n%s", err, out)
	}
	if out, err := runTide(t, dir, "checkpoint", "show", "-f", cfg); err != nil || !strings.Contains(out, `pipeline "gen-mongo" has no checkpoint`) {
		t.Fatalf("tide checkpoint show after reset: %v\n%s", err, out)
	}
}
