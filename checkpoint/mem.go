package checkpoint

import (
	"bytes"
	"context"
	"sync"

	"github.com/tide-cdc/tide/cdc"
)

// Mem is an in-memory checkpoint store for tests. The zero value is ready
// to use and it is safe for concurrent use. It copies checkpoints in and
// out, so callers may reuse their buffers.
type Mem struct {
	mu    sync.Mutex // guards the fields below
	saved map[string]cdc.Checkpoint
	saves int
}

// Load returns the pipeline's last saved checkpoint, or nil if none.
func (m *Mem) Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, ok := m.saved[pipeline]
	if !ok {
		return nil, nil
	}
	c := clone(cp)
	return &c, nil
}

// Save replaces the pipeline's checkpoint.
func (m *Mem) Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saved == nil {
		m.saved = make(map[string]cdc.Checkpoint)
	}
	m.saved[pipeline] = clone(cp)
	m.saves++
	return nil
}

// Reset deletes the pipeline's checkpoint.
func (m *Mem) Reset(ctx context.Context, pipeline string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.saved, pipeline)
	return nil
}

// Saves returns how many times Save succeeded, for tests that count commits.
func (m *Mem) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

func clone(cp cdc.Checkpoint) cdc.Checkpoint {
	return cdc.Checkpoint{
		Source: bytes.Clone(cp.Source),
		Meta:   cloneMeta(cp.Meta),
		Sink:   bytes.Clone(cp.Sink),
	}
}
