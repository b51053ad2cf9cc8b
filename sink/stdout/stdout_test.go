package stdout

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

func TestWritesLinesOnCommit(t *testing.T) {
	var out bytes.Buffer
	s := New(Config{Writer: &out})
	ctx := t.Context()
	if err := s.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	batch := []cdc.Record{
		{Event: cdc.Event{Op: cdc.OpInsert}, Data: []byte(`{"a":1}`)},
		{Event: cdc.Event{Op: cdc.OpDelete}, Data: []byte(`{"b":2}`)},
	}
	if err := s.Put(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("output before Commit: %q", out.String())
	}
	if err := s.Commit(ctx, cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	if want := "{\"a\":1}\n{\"b\":2}\n"; out.String() != want {
		t.Fatalf("output = %q, want %q", out.String(), want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteErrorFailsCommit(t *testing.T) {
	s := New(Config{Writer: failWriter{}})
	ctx := t.Context()
	if err := s.Put(ctx, []cdc.Record{{Data: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, cdc.Checkpoint{})
	if err == nil || !strings.Contains(err.Error(), "stdout sink: broken pipe") {
		t.Fatalf("Commit = %v, want the write error", err)
	}
}
