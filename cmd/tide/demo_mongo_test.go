package main

import (
	"strings"
	"testing"
)

// TestDemoToMongo: tide demo --to-mongo, interrupted while it writes and
// streams, drains and says so; the next run resumes from the checkpoint
// kept in the second server and ends with B's demo.orders equal to A's.
func TestDemoToMongo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := interruptDemo(t, dir, "changes", "--to-mongo", "--events", "1000000", "--rate", "2000", "--progress", "always")
	if !strings.Contains(out, "interrupted: run tide demo --to-mongo again to resume") {
		t.Fatalf("interrupted demo output lacks the interruption:\n%s", out)
	}
	out, err := runTide(t, dir, "demo", "--to-mongo", "--events", "500", "--rate", "0", "--progress", "never")
	if err != nil {
		t.Fatalf("demo --to-mongo after the interrupt: %v\n%s", err, out)
	}
	for _, want := range []string{"resuming from the checkpoint in B", "streamed ", "checked demo.orders on B: it holds exactly the", "of A, document for document"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo --to-mongo output lacks %q:\n%s", want, out)
		}
	}
	if out, err := runTide(t, dir, "demo", "--to-mongo", "--nats"); err == nil || !strings.Contains(out, "choose one demo") {
		t.Errorf("demo --to-mongo --nats = %v:\n%s", err, out)
	}
}
