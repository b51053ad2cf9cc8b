package tide

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/transform"
)

// TestSpecTransforms runs a pipeline file's transforms, a program's own
// Go transform after them, and routes into one file per route; a change
// that fails a transform becomes a dead letter, read back by the Spec.
func TestSpecTransforms(t *testing.T) {
	dir := t.TempDir()
	text := fmt.Sprintf(`name: shaped
data_dir: %[1]s/data
source: {generate: {count: 30, payload_bytes: 3}}
sink: {file: {path: "%[1]s/out/{route}.jsonl"}}
transforms:
  - filter: {ops: [insert], where: 'doc.seq %% 3 != 0'}
  - drop_fields: [payload]
  - set: {parity: 'doc.seq %% 2 == 0 ? "even" : "odd"', bad: 'doc.seq == 10 ? doc.parity * 2 : 0'}
  - route: 'doc.parity'
on_error: dead_letter
dead_letter: {file: {path: %[1]s/dead.jsonl}}
`, dir)
	reg := prometheus.NewRegistry()
	s, err := Parse([]byte(text), Options{Metrics: reg, Transforms: []transform.Step{{
		FuncName: "tag",
		Func: func(ev *cdc.Event) (bool, error) {
			ev.Route += "_go"
			return true, nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, parity := range []string{"even", "odd"} {
		b, err := os.ReadFile(filepath.Join(dir, "out", parity+"_go.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var want []string
		for seq := 1; seq <= 30; seq++ {
			if seq%3 == 0 || seq == 10 || (seq%2 == 0) != (parity == "even") {
				continue
			}
			want = append(want, fmt.Sprintf(`"_full_document":{"_id":%d,"seq":%d,"parity":"%s","bad":0}`, seq, seq, parity))
		}
		if len(lines) != len(want) {
			t.Fatalf("%s: %d lines, want %d:\n%s", parity, len(lines), len(want), b)
		}
		for i, l := range lines {
			if !strings.Contains(l, want[i]) {
				t.Errorf("%s line %d = %s\nwant it to hold %s", parity, i, l, want[i])
			}
		}
	}
	letters, err := s.DeadLetters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].Stage != "transform" || !strings.Contains(letters[0].Error, "transforms[2].set.bad: no such overload") ||
		string(letters[0].Position) != `{"seq":10}` || !strings.Contains(string(letters[0].Change.FullDocument), `"payload":"xxx"`) {
		t.Fatalf("dead letters = %+v", letters)
	}
	if got := dropped(t, reg, "transforms[0].filter"); got != 10 {
		t.Errorf("tide_transform_dropped_total{transform=transforms[0].filter} = %v, want 10", got)
	}
}

func dropped(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tide_transform_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "transform" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no tide_transform_dropped_total{transform=%q}", name)
	return 0
}

func TestSpecTransformErrors(t *testing.T) {
	base := "name: p\nsource: {generate: }\nsink: {stdout: }\n"
	for name, tc := range map[string]struct{ text, want string }{
		"where at its column": {base + "transforms:\n  - filter: {where: 'doc.seq > \"a\" && nope'}\n", "line 5: transforms[0].filter.where: column 18: undeclared reference to 'nope'"},
		"dead_letter needed":  {base + "on_error: dead_letter\n", "sink.stdout keeps no dead letters itself"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestSpecReplay sets a change aside, then replays it after the
// pipeline file is fixed: it lands in its route's file, and the
// checkpoint stays where it was.
func TestSpecReplay(t *testing.T) {
	dir := t.TempDir()
	file := func(bad string) string {
		return fmt.Sprintf(`name: replayed
data_dir: %[1]s/data
source: {generate: {count: 8, payload_bytes: 1}}
sink: {file: {path: "%[1]s/out/{route}.jsonl"}}
transforms:
  - set: {v: '%[2]s'}
  - route: '"r"'
on_error: dead_letter
dead_letter: {file: {path: %[1]s/dead.jsonl}}
`, dir, bad)
	}
	run := func(text string, replay bool) *Spec {
		t.Helper()
		s, err := Parse([]byte(text), Options{})
		if err != nil {
			t.Fatal(err)
		}
		var p *Pipeline
		if replay {
			letters, err := s.DeadLetters(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			p, err = s.BuildReplay(t.Context(), letters)
			if err != nil {
				t.Fatal(err)
			}
		} else if p, err = s.Build(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := run(file(`doc.seq == 3 || doc.seq == 6 ? doc.payload * 2 : doc.seq`), false)
	out := filepath.Join(dir, "out", "r.jsonl")
	if b, _ := os.ReadFile(out); strings.Count(string(b), "\n") != 6 {
		t.Fatalf("before replay:\n%s", b)
	}
	store, err := s.Checkpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before, err := store.Load(t.Context())
	store.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = run(file(`doc.seq`), true) // fixed
	b, _ := os.ReadFile(out)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 8 ||
		!strings.Contains(lines[6], `"seq":3,"payload":"x","v":3`) || !strings.Contains(lines[7], `"seq":6,"payload":"x","v":6`) {
		t.Fatalf("after replay:\n%s", b)
	}
	store, err = s.Checkpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	after, err := store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if string(after.Source) != string(before.Source) || string(after.Sink) == string(before.Sink) {
		t.Fatalf("checkpoint before %s / %s, after %s / %s: want the same position and the file's new length", before.Source, before.Sink, after.Source, after.Sink)
	}

	// The pipeline goes on from the same place, with the replayed lines kept.
	run(file(`doc.seq`), false)
	if b2, _ := os.ReadFile(out); string(b2) != string(b) {
		t.Fatalf("a run after the replay changed the file:\n%s", b2)
	}
}
