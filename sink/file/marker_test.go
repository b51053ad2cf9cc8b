package file

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// TestFreshMarkerBoundToPipeline: a first run that crashed before its
// first checkpoint leaves its bytes and its marker. Another pipeline, with
// another data directory, is refused them, naming the owner; the owner
// itself takes them back and cuts them.
func TestFreshMarkerBoundToPipeline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	alphaDir := filepath.Join(dir, "a")
	alpha := ownedSink(t, path, "alpha", alphaDir)
	if err := alpha.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	putCommit(t, alpha, records(1, 3))
	alpha.Close() // dies before its first checkpoint

	tests := map[string]struct{ pipeline, dataDir string }{
		"other pipeline, other data directory": {"beta", filepath.Join(dir, "b")},
		"same name, other data directory":      {"alpha", filepath.Join(dir, "b")},
		"other name, same data directory":      {"beta", alphaDir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := ownedSink(t, path, tc.pipeline, tc.dataDir).Open(t.Context(), nil)
			want := `file sink ` + path + ` holds 30 bytes that pipeline "alpha" (data directory ` + alphaDir + `) wrote before its first checkpoint (marker ` + path + freshSuffix + `)`
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "run that pipeline, or set another sink.file.path") {
				t.Fatalf("Open = %v\nwant an error containing %q", err, want)
			}
			if got := readFile(t, path); got != lines(1, 3) {
				t.Fatalf("a refused Open changed the file to %q", got)
			}
		})
	}

	// The owner, with its data directory spelled another way, is the owner.
	rel, err := filepath.Rel(mustGetwd(t), alphaDir)
	if err != nil {
		t.Fatal(err)
	}
	again := ownedSink(t, path, "alpha", rel)
	if err := again.Open(t.Context(), nil); err != nil {
		t.Fatalf("the owner's restart: %v", err)
	}
	if got := readFile(t, path); got != "" {
		t.Fatalf("the owner's restart kept its uncommitted bytes: %q", got)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestMarkerWithoutOwner: a marker that names no pipeline (written by an
// older tide) is taken as ours, as it was before markers named owners.
func TestMarkerWithoutOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	os.WriteFile(path, []byte(lines(1, 3)), 0o644)
	os.WriteFile(path+freshSuffix, []byte("written by tide: "+path+" has no checkpoint yet; its content is uncommitted\n"), 0o644)
	s := ownedSink(t, path, "alpha", t.TempDir())
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatalf("Open with an older tide's marker: %v", err)
	}
	if got := readFile(t, path); got != "" {
		t.Fatalf("the uncommitted bytes were kept: %q", got)
	}
}

// TestEmptyFileTakenOver: another pipeline's marker on an empty file
// covers nothing, so a new pipeline may take the file; the marker then
// names the new owner.
func TestEmptyFileTakenOver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	alpha := ownedSink(t, path, "alpha", filepath.Join(dir, "a"))
	if err := alpha.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	alpha.Close() // dies before writing anything

	beta := ownedSink(t, path, "beta", filepath.Join(dir, "b"))
	if err := beta.Open(t.Context(), nil); err != nil {
		t.Fatalf("Open of an empty file with another pipeline's marker: %v", err)
	}
	if o := readOwner(path + freshSuffix); o.Pipeline != "beta" {
		t.Fatalf("the marker names %q, want beta", o.Pipeline)
	}
	putCommit(t, beta, records(1, 1))
	beta.Close()
	err := ownedSink(t, path, "alpha", filepath.Join(dir, "a")).Open(t.Context(), &cdc.Checkpoint{})
	if err == nil || !strings.Contains(err.Error(), `pipeline "beta"`) {
		t.Fatalf("alpha's Open of beta's file = %v, want a refusal naming beta", err)
	}
}
