package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/sink/file"
)

// The file sink appends one line per record and makes them durable on
// Commit; its state in the checkpoint is the committed length, which a
// restart cuts the file back to.
func Example() {
	dir, err := os.MkdirTemp("", "tide-file")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "out.jsonl")

	ctx := context.Background()
	sink := file.New(file.Config{Path: path, Pipeline: "example", DataDir: dir})
	if err := sink.Open(ctx, nil); err != nil {
		panic(err)
	}
	batch := []cdc.Record{{Data: []byte(`{"n":1}`)}, {Data: []byte(`{"n":2}`)}}
	if err := sink.Put(ctx, batch); err != nil {
		panic(err)
	}
	if err := sink.Commit(ctx, cdc.Checkpoint{}); err != nil {
		panic(err)
	}
	if err := sink.Close(); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(b))
	// Output:
	// {"n":1}
	// {"n":2}
}
