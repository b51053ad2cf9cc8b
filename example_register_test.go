package tide_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/tide-cdc/tide"
	"github.com/tide-cdc/tide/cdc"
)

// countConfig is the section of a sink a program registers itself:
// sink.count in a pipeline file.
type countConfig struct {
	Label string `yaml:"label"` // required
}

func (c *countConfig) Validate() error {
	if c.Label == "" {
		return errors.New("label: required")
	}
	return nil
}

// countSink counts the records it commits. At-least-once: it keeps no
// state in the checkpoint.
type countSink struct {
	label     string
	put, done int
}

func (s *countSink) Open(context.Context, *cdc.Checkpoint) error { return nil }
func (s *countSink) Put(_ context.Context, batch []cdc.Record) error {
	s.put += len(batch)
	return nil
}
func (s *countSink) Commit(context.Context, cdc.Checkpoint) error {
	s.done, s.put = s.done+s.put, 0
	return nil
}
func (s *countSink) Close() error {
	fmt.Printf("%s: %d records\n", s.label, s.done)
	return nil
}

// A program registers its own sink under a key; pipeline files name it
// like a built-in one, and Parse checks its keys with their lines.
func ExampleRegisterSink() {
	tide.RegisterSink("count", func() *countConfig { return &countConfig{} },
		func(_ context.Context, c *countConfig, _ *tide.Env) (cdc.Sink, error) {
			return &countSink{label: c.Label}, nil
		})

	dir, err := os.MkdirTemp("", "tide-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	_, err = tide.Parse([]byte("name: counted\nsource: {generate: {count: 5}}\nsink:\n  count: {lable: x}\n"), tide.Options{})
	fmt.Println(err)

	spec, err := tide.Parse(fmt.Appendf(nil, "name: counted\nsource: {generate: {count: 5}}\nsink:\n  count: {label: generated}\ndata_dir: %q\n", dir), tide.Options{})
	if err != nil {
		log.Fatal(err)
	}
	p, err := spec.Build(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// line 4: sink.count.lable: unknown key (did you mean label?)
	// generated: 5 records
}
