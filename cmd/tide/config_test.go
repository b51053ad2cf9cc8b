package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tide config reference prints docs/config.md, or one section of it, and
// -o writes it to a file; an unknown section fails naming the known ones.
func TestConfigReferenceCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := runTide(t, dir, "config", "reference", "sink.postgres")
	if err != nil || !strings.HasPrefix(out, "## sink.postgres\n") || !strings.Contains(out, "| `sink.postgres.dsn` |") {
		t.Errorf("tide config reference sink.postgres: %v\n%s", err, out)
	}
	if _, err := runTide(t, dir, "config", "reference", "-o", "config.md"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("tide config reference -o differs from docs/config.md")
	}
	out, err = runTide(t, dir, "config", "reference", "sink.nope")
	if err == nil || !strings.Contains(out, `no section "sink.nope"`) {
		t.Errorf("unknown section: %v\n%s", err, out)
	}
}
