package tide_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tide-cdc/tide"
)

// A pipeline built from the text of a pipeline file, as tide run -f
// builds it: 1000 generated events into a JSON-lines file.
func ExampleSpec_Build() {
	dir, err := os.MkdirTemp("", "tide-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	out := filepath.Join(dir, "events.jsonl")
	yamlText := fmt.Appendf(nil, `
name: gen-to-file
source:
  generate: {count: 1000}
sink:
  file: {path: %q}
data_dir: %q
`, out, filepath.Join(dir, "data"))

	ctx := context.Background()
	spec, err := tide.Parse(yamlText, tide.Options{})
	if err != nil {
		log.Fatal(err) // every problem names its key and line
	}
	p, err := spec.Build(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	// A finite source: Run returns nil once every event is committed.
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bytes.Count(b, []byte("\n")), "lines,", p.Stats().EventsOut, "events committed")
	// Output: 1000 lines, 1000 events committed
}
