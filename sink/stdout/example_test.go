package stdout_test

import (
	"context"
	"os"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/sink/stdout"
)

// The stdout sink writes each record as a line when the batch commits.
func Example() {
	sink := stdout.New(stdout.Config{Writer: os.Stdout})
	ctx := context.Background()
	if err := sink.Open(ctx, nil); err != nil {
		panic(err)
	}
	defer sink.Close()
	sink.Put(ctx, []cdc.Record{{Data: []byte(`{"n":1}`)}})
	sink.Commit(ctx, cdc.Checkpoint{})
	// Output: {"n":1}
}
