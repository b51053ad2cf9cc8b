package file

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestTemplateRoute(t *testing.T) {
	dir := t.TempDir()
	s := newSink(t, filepath.Join(dir, "out", "{db}", "{route}.jsonl"))
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	recs := nsRecords(1, 6, "shop.orders", "shop.items")
	routes := []string{"eu", "us", "eu", "eu", "us", "other"}
	for i := range recs {
		recs[i].Route = routes[i]
	}
	saved := putCommit(t, s, recs)
	want := map[string][]int{"eu": {1, 3, 4}, "us": {2, 5}, "other": {6}}
	for route, seqs := range want {
		var b strings.Builder
		for _, i := range seqs {
			fmt.Fprintf(&b, "{\"seq\":%d,\"ns\":%q}\n", i, recs[i-1].Namespace)
		}
		if got := readFile(t, filepath.Join(dir, "out", "shop", route+".jsonl")); got != b.String() {
			t.Errorf("route %s: %q, want %q", route, got, b.String())
		}
	}
	s.Close()

	// Restarted from the checkpoint, the files are the same ones.
	s = newSink(t, filepath.Join(dir, "out", "{db}", "{route}.jsonl"))
	if err := s.Open(t.Context(), &saved); err != nil {
		t.Fatal(err)
	}
	more := nsRecords(7, 7, "shop.orders")
	more[0].Route = "us"
	putCommit(t, s, more)
	if got := readFile(t, filepath.Join(dir, "out", "shop", "us.jsonl")); !strings.HasSuffix(got, "{\"seq\":7,\"ns\":\"shop.orders\"}\n") || strings.Count(got, "\n") != 3 {
		t.Errorf("us.jsonl after restart = %q", got)
	}

	// A record without a route cannot fill {route}.
	none := nsRecords(8, 8, "shop.orders")
	if err := s.Put(t.Context(), none); err == nil || !strings.Contains(err.Error(), "no route to fill {route}") {
		t.Fatalf("Put without a route = %v", err)
	}
	s.Close()
}
