package tide

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/internal/configdoc"
)

// docs/config.md, and the doc comments compiled in for it, are what the
// sources say now: a connector or key added or documented without
// `go generate ./internal/configdoc` fails here.
func TestConfigReferenceUpToDate(t *testing.T) {
	scanned, err := configdoc.Scan(".")
	if err != nil {
		t.Fatal(err)
	}
	if compiled := configdoc.Comments(); !maps.Equal(scanned, compiled) {
		var differ []string
		for k, v := range scanned {
			if compiled[k] != v {
				differ = append(differ, k)
			}
		}
		for k := range compiled {
			if _, ok := scanned[k]; !ok {
				differ = append(differ, k)
			}
		}
		slices.Sort(differ)
		t.Fatalf("internal/configdoc/comments_gen.go is stale (%s): run go generate ./internal/configdoc", strings.Join(differ, ", "))
	}
	var b strings.Builder
	if err := WriteConfigReference(&b, ""); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != b.String() {
		t.Fatal("docs/config.md is stale: run go generate ./internal/configdoc")
	}
}

// The reference lists every registered connector and every key of its
// Config, with types, defaults and doc comments; one section alone on
// request, and an unknown section is refused with the known ones.
func TestConfigReference(t *testing.T) {
	var all strings.Builder
	if err := WriteConfigReference(&all, ""); err != nil {
		t.Fatal(err)
	}
	for _, key := range Sources() {
		if !strings.Contains(all.String(), "\n## source."+key+"\n") {
			t.Errorf("no section for source.%s", key)
		}
	}
	for _, key := range Sinks() {
		if !strings.Contains(all.String(), "\n## sink."+key+"\n") {
			t.Errorf("no section for sink.%s", key)
		}
	}
	for _, row := range []string{
		"| `retry.max_elapsed` | duration |  | MaxElapsed gives up",
		"| `batch.max_bytes` | byte size | `4MiB` |",
		"| `sink.postgres.dsn` | string (secret) |  | libpq URL",
		"| `sink.postgres.create_table` | bool | `true` |",
		"| `source.mongo.uri` | string (secret) | `embedded` |",
	} {
		if !strings.Contains(all.String(), row) {
			t.Errorf("the reference lacks the row %q", row)
		}
	}
	var one strings.Builder
	if err := WriteConfigReference(&one, "sink.postgres"); err != nil {
		t.Fatal(err)
	}
	if got := one.String(); !strings.HasPrefix(got, "## sink.postgres\n") || strings.Contains(got, "## source.") || strings.Contains(got, "# Configuration reference") {
		t.Errorf("the sink.postgres section alone:\n%s", got)
	}
	err := WriteConfigReference(&one, "sink.nope")
	if err == nil || !strings.Contains(err.Error(), `no section "sink.nope"`) || !strings.Contains(err.Error(), "sink.postgres") {
		t.Errorf("unknown section: %v", err)
	}
}
