package tide

import (
	"fmt"
	"io"
	"strings"

	"github.com/tide-cdc/tide/internal/config"
	"github.com/tide-cdc/tide/internal/configdoc"
)

// WriteConfigReference writes the configuration reference as Markdown:
// every key of a pipeline file, and of each registered source and sink,
// with its type, default and doc comment (docs/config.md). With a
// section ("sink.postgres", "source.mongo", or "pipeline" for the top
// level), only that one.
func WriteConfigReference(w io.Writer, section string) error {
	sections := []configdoc.Section{{
		Path:   "",
		Config: config.Defaults(),
		Note: "The top level of a pipeline file. `source` names one source, `source: {KEY: {...}}`, one of " +
			list("source", Sources()) + "; `sink` one sink, one of " + list("sink", Sinks()) + ".",
		Skip: []string{"source", "sink"},
	}}
	for _, key := range Sources() {
		sections = append(sections, configdoc.Section{Path: "source." + key, Config: lookup(registry.sources, key).newConfig()})
	}
	for _, key := range Sinks() {
		sections = append(sections, configdoc.Section{Path: "sink." + key, Config: lookup(registry.sinks, key).newConfig()})
	}
	if section == "" {
		return configdoc.Write(w, sections, true)
	}
	var names []string
	for _, s := range sections {
		name := s.Path
		if name == "" {
			name = "pipeline"
		}
		if name == section {
			return configdoc.Write(w, []configdoc.Section{s}, false)
		}
		names = append(names, name)
	}
	return fmt.Errorf("config reference: no section %q: want one of %s", section, strings.Join(names, ", "))
}

// list links each key to its section of the reference.
func list(kind string, keys []string) string {
	links := make([]string, len(keys))
	for i, k := range keys {
		links[i] = "[" + k + "](#" + kind + k + ")"
	}
	return strings.Join(links, ", ")
}
