package tide

import (
	"context"
	"fmt"

	"github.com/tide-cdc/tide/checkpoint/natskv"
)

// FenceCheckpoint makes owner the owner of the NATS KV checkpoint of the
// pipeline yamlText describes, without building the pipeline or locking
// its data directory: any earlier owner's next save fails. A worker taking
// a pipeline over calls it first, so that a former owner that was paused,
// not killed, and still holds the data directory cannot commit again while
// the new owner waits for the directory.
func FenceCheckpoint(ctx context.Context, yamlText []byte, opts Options, owner string) error {
	cfg, err := parse(yamlText, opts)
	if err != nil {
		return err
	}
	if cfg.CheckpointStore.NATSKV == nil {
		return fmt.Errorf("pipeline %q cannot be fenced for owner %q: only a checkpoint in NATS KV can (checkpoint: {nats_kv: ...})", cfg.Name, owner)
	}
	return withNATSKV(ctx, cfg, func(s *natskv.Store) error { return s.Fence(ctx, cfg.Name, owner) })
}
