package checkpoint

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

func TestMemCopiesAndResets(t *testing.T) {
	var m Mem
	ctx := t.Context()
	if cp, err := m.Load(ctx, "p"); cp != nil || err != nil {
		t.Fatalf("Load on empty Mem = %v, %v", cp, err)
	}
	pos := cdc.Position(`{"seq":1}`)
	if err := m.Save(ctx, "p", cdc.Checkpoint{Source: pos, Meta: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	pos[2] = 'X' // the caller reuses its buffer
	cp, _ := m.Load(ctx, "p")
	if string(cp.Source) != `{"seq":1}` || cp.Meta["a"] != "b" {
		t.Fatalf("Load = %+v; Save did not copy", cp)
	}
	cp.Meta["a"] = "changed"
	if cp2, _ := m.Load(ctx, "p"); cp2.Meta["a"] != "b" {
		t.Fatal("Load did not copy Meta")
	}
	if err := m.Reset(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if cp, _ := m.Load(ctx, "p"); cp != nil {
		t.Fatalf("Load after Reset = %+v", cp)
	}
	if m.Saves() != 1 {
		t.Fatalf("Saves = %d, want 1", m.Saves())
	}
}

func TestStoresConcurrent(t *testing.T) {
	stores := map[string]interface {
		Save(ctx context.Context, pipeline string, cp cdc.Checkpoint) error
		Load(ctx context.Context, pipeline string) (*cdc.Checkpoint, error)
	}{
		"mem": &Mem{},
		"dir": openDir(t, t.TempDir()),
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					pipeline := fmt.Sprintf("p%d", g%2) // two writers per pipeline
					for i := range 20 {
						if err := s.Save(ctx, pipeline, cdc.Checkpoint{Source: cdc.Position(fmt.Sprint(i))}); err != nil {
							t.Error(err)
							return
						}
						if _, err := s.Load(ctx, pipeline); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			for _, p := range []string{"p0", "p1"} {
				if cp, err := s.Load(ctx, p); err != nil || string(cp.Source) != "19" {
					t.Fatalf("Load(%s) = %+v, %v; want position 19", p, cp, err)
				}
			}
		})
	}
}

func BenchmarkCheckpointSave(b *testing.B) {
	cp := cdc.Checkpoint{
		Source: cdc.Position(`{"seq":123456789}`),
		Meta:   map[string]string{"source": "generate"},
		Sink:   []byte(`{"committed_bytes":24691357800}`),
	}
	d, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var m Mem
	stores := []struct {
		name string
		save func() error
	}{
		{"mem", func() error { return m.Save(b.Context(), "bench", cp) }},
		{"dir", func() error { return d.Save(b.Context(), "bench", cp) }},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.save(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
