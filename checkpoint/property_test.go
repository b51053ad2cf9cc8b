package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/cdc"
)

// jsonValue generates arbitrary JSON values up to depth levels deep.
func jsonValue(depth int) *rapid.Generator[any] {
	leaves := []*rapid.Generator[any]{
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Int64(), func(i int64) any { return i }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
	}
	if depth == 0 {
		return rapid.OneOf(leaves...)
	}
	return rapid.OneOf(append(leaves,
		rapid.Map(rapid.SliceOfN(jsonValue(depth-1), 0, 4), func(s []any) any { return s }),
		rapid.Map(rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 4), func(m map[string]any) any { return m }),
	)...)
}

// compactJSON encodes v as a source would: compact, without HTML escapes.
func compactJSON(t *rapid.T, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func genCheckpoint(t *rapid.T) cdc.Checkpoint {
	var cp cdc.Checkpoint
	if rapid.Bool().Draw(t, "has source") {
		cp.Source = compactJSON(t, jsonValue(2).Draw(t, "source"))
		if string(cp.Source) == "null" {
			cp.Source = nil
		}
	}
	if m := rapid.MapOfN(rapid.String(), rapid.String(), 0, 4).Draw(t, "meta"); len(m) > 0 {
		cp.Meta = m
	}
	if rapid.Bool().Draw(t, "has sink") {
		cp.Sink = compactJSON(t, map[string]any{"committed_bytes": rapid.Int64Min(0).Draw(t, "bytes")})
	}
	return cp
}

// TestPropertyRoundTrip: what Save stores, Load returns byte for byte.
func TestPropertyRoundTrip(t *testing.T) {
	d := openDir(t, t.TempDir())
	rapid.Check(t, func(t *rapid.T) {
		cp := genCheckpoint(t)
		if err := d.Save(t.Context(), "p", cp); err != nil {
			t.Fatal(err)
		}
		got, err := d.Load(t.Context(), "p")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Source, cp.Source) || !bytes.Equal(got.Sink, cp.Sink) || !reflect.DeepEqual(got.Meta, cp.Meta) {
			t.Fatalf("Load = %+v\nwant %+v", got, cp)
		}
	})
}

// TestPropertyDamageNeverChangesTheCheckpoint: after any change of one
// byte, Load either refuses with a *CorruptError, or returns the very
// checkpoint that was saved (a harmless change, such as one whitespace
// character for another, or damage to the older page), or the one saved
// before it (damage to the newer page). It never returns another one.
func TestPropertyDamageNeverChangesTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	d := openDir(t, dir)
	rapid.Check(t, func(t *rapid.T) {
		// A fresh pipeline each time: the previous check left damage.
		if err := d.Reset(t.Context(), "p"); err != nil {
			t.Fatal(err)
		}
		prev := genCheckpoint(t)
		if rapid.Bool().Draw(t, "saved before") {
			if err := d.Save(t.Context(), "p", prev); err != nil {
				t.Fatal(err)
			}
		} else {
			prev = cdc.Checkpoint{Source: cdc.Position("none")} // matches nothing Load returns
		}
		cp := genCheckpoint(t)
		if err := d.Save(t.Context(), "p", cp); err != nil {
			t.Fatal(err)
		}
		path := File(dir, "p")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := rapid.IntRange(0, len(b)-1).Draw(t, "index")
		b[i] ^= rapid.ByteRange(1, 255).Draw(t, "mask")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := d.Load(t.Context(), "p")
		var ce *CorruptError
		switch {
		case errors.As(err, &ce):
		case err != nil:
			t.Fatalf("Load = %v, want a *CorruptError", err)
		case !sameCheckpoint(got, cp) && !sameCheckpoint(got, prev):
			t.Fatalf("a damaged record was accepted as a different checkpoint:\n got %+v\nwant %+v\n  or %+v\nfile %q", got, cp, prev, b)
		}
	})
}

func sameCheckpoint(got *cdc.Checkpoint, want cdc.Checkpoint) bool {
	return bytes.Equal(got.Source, want.Source) && bytes.Equal(got.Sink, want.Sink) && reflect.DeepEqual(got.Meta, want.Meta)
}
