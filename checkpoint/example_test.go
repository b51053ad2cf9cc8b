package checkpoint_test

import (
	"context"
	"fmt"
	"os"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint"
)

// A directory store keeps one checksummed file per pipeline and holds a
// lock on the directory while it is open.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "tide-checkpoints")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := checkpoint.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := store.Save(ctx, "orders", cdc.Checkpoint{Source: cdc.Position(`{"seq":42}`)}); err != nil {
		panic(err)
	}
	store.Close()

	// A second run finds the checkpoint again.
	store, err = checkpoint.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	cp, err := store.Load(ctx, "orders")
	if err != nil {
		panic(err)
	}
	fmt.Printf("resume after %s\n", cp.Source)
	// Output: resume after {"seq":42}
}
