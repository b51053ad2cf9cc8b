package file

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tide-cdc/tide/cdc"
)

// mustTemplate parses path, a template.
func mustTemplate(t *testing.T, path string) *template {
	t.Helper()
	tmpl, err := parseTemplate(path)
	if err != nil || tmpl == nil {
		t.Fatalf("parseTemplate(%q) = %v, %v", path, tmpl, err)
	}
	return tmpl
}

func TestShortNamesUnchanged(t *testing.T) {
	t.Parallel()
	for ns, want := range map[string]string{
		"shop.orders":                   "/out/shop/orders.jsonl",
		"a." + strings.Repeat("c", 240): "/out/a/" + strings.Repeat("c", 240) + ".jsonl", // 246 bytes: room for ".tide-new"
		strings.Repeat("d", 63) + "." + strings.Repeat("c", 191): "/out/" + strings.Repeat("d", 63) + "/" + strings.Repeat("c", 191) + ".jsonl",
		"shop." + strings.Repeat("/", 80):                        "/out/shop/" + strings.Repeat("%2F", 80) + ".jsonl",
	} {
		path, full, err := mustTemplate(t, "/out/{db}/{coll}.jsonl").render(ns)
		if err != nil || path != want || full != want {
			t.Errorf("render(%.20q...) = %q, %q, %v; want %q unchanged", ns, path, full, err, want)
		}
	}
}

// TestShortenedName pins the rule: a name that the rule would give
// differently in another version is a file a restart does not find.
func TestShortenedName(t *testing.T) {
	t.Parallel()
	ns := "a." + strings.Repeat("c", 253) // MongoDB's longest namespace
	path, full, err := mustTemplate(t, "/out/{db}/{coll}.jsonl").render(ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/out/a/" + strings.Repeat("c", 253) + ".jsonl"; full != want {
		t.Errorf("full = %q, want %q", full, want)
	}
	want := "/out/a/" + strings.Repeat("c", 246-6-17) + "~" + "2c83d66c4850c4f8" + ".jsonl"
	if path != want {
		t.Errorf("render = %q, want %q", path, want)
	}
}

func TestShortenedNames(t *testing.T) {
	t.Parallel()
	long := func(r string, n int) string { return strings.Repeat(r, n) }
	for name, tc := range map[string]struct {
		tmpl, ns string
		tail     string // the literal text the name must keep at its end
	}{
		"255-byte namespace, one element": {"/out/{db}.{coll}.jsonl", long("d", 63) + "." + long("c", 191), ".jsonl"},
		"longest collection":              {"/out/{db}/{coll}.jsonl", "a." + long("c", 253), ".jsonl"},
		"slashes, 3 bytes each":           {"/out/{db}/{coll}.jsonl", "shop." + long("/", 84), ".jsonl"},
		"slashes after one byte":          {"/out/{db}/{coll}.jsonl", "shop.x" + long("/", 84), ".jsonl"},
		"slashes after two bytes":         {"/out/{db}/{coll}.jsonl", "shop.xy" + long("/", 84), ".jsonl"},
		"euro signs, 3 bytes each":        {"/out/{db}/{coll}.jsonl", "shop." + long("€", 84), ".jsonl"},
		"euro signs after one byte":       {"/out/{db}/{coll}.jsonl", "shop.x" + long("€", 84), ".jsonl"},
		"euro signs after two bytes":      {"/out/{db}/{coll}.jsonl", "shop.xy" + long("€", 84), ".jsonl"},
		"mixed":                           {"/out/{db}/{coll}.jsonl", "shop." + long("é/€:", 40), ".jsonl"},
		"text around":                     {"/out/{db}/x-{coll}-events.jsonl", "shop." + long("c", 250), "-events.jsonl"},
		"no extension":                    {"/out/{db}/{coll}", "shop." + long("c", 250), ""},
		"long database directory":         {"/out/{db}-{db}-{db}-{db}-{db}/{coll}.jsonl", long("d", 63) + ".c", "/c.jsonl"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tmpl := mustTemplate(t, tc.tmpl)
			path, full, err := tmpl.render(tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if path == full {
				t.Fatalf("render(%q) = %q, not shortened", tc.ns, path)
			}
			if !strings.HasSuffix(path, tc.tail) {
				t.Errorf("%q lost its ending %q", path, tc.tail)
			}
			if !utf8.ValidString(path) {
				t.Errorf("%q is not UTF-8", path)
			}
			for elem := range strings.SplitSeq(path, "/") {
				limit := nameMax
				if strings.HasSuffix(path, "/"+elem) {
					limit -= len(freshSuffix)
				}
				if len(elem) > limit {
					t.Errorf("element %q is %d bytes, more than %d", elem, len(elem), limit)
				}
				if i := strings.IndexByte(elem, '~'); i >= 0 {
					if cut := elem[:i]; strings.HasSuffix(cut, "%") || len(cut) > 1 && cut[len(cut)-2] == '%' {
						t.Errorf("element %q is cut in a %%XX escape", elem)
					}
				}
			}
			again, _, _ := mustTemplate(t, tc.tmpl).render(tc.ns)
			if again != path {
				t.Errorf("render again = %q, want the same %q", again, path)
			}
			// The same start, another end: another file.
			other, _, err := tmpl.render(tc.ns + "x")
			if err != nil || other == path {
				t.Errorf("render(%q+x) = %q, %v; want a file other than %q", tc.ns, other, err, path)
			}
		})
	}
}

func TestShortenedToPathMax(t *testing.T) {
	t.Parallel()
	root := "/" + strings.Repeat("r", 200)
	tmpl := mustTemplate(t, root+"/{db}/{coll}/{coll}.jsonl")
	tmpl.pathMax = 400
	ns := "shop." + strings.Repeat("c", 150)
	path, full, err := tmpl.render(ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(full)+len(freshSuffix) < 400 {
		t.Fatalf("the test's path %d bytes long is not too long", len(full))
	}
	if n := len(path) + len(freshSuffix); n > 399 {
		t.Errorf("render = %q, %d bytes with the marker's suffix; want at most 399", path, n)
	}
	// The last element goes first; the directory is cut only as far as
	// needed.
	if dir := filepath.Base(filepath.Dir(path)); dir != strings.Repeat("c", 150) || !strings.Contains(filepath.Base(path), "~") {
		t.Errorf("render = %q: want the file's name shortened first", path)
	}
	tmpl.pathMax = 250
	if _, _, err := tmpl.render(ns); err == nil || !strings.Contains(err.Error(), "longer than the 249 bytes a path may have") {
		t.Errorf("render with a path that cannot fit = %v, want an error", err)
	}
}

func TestShortenedNameLimitFromFileSystem(t *testing.T) {
	t.Parallel()
	tmpl := mustTemplate(t, "/out/{db}/{coll}.jsonl")
	tmpl.nameMax = 143 // eCryptfs with encrypted names
	path, _, err := tmpl.render("shop." + strings.Repeat("c", 200))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(filepath.Base(path)); n != 143-len(freshSuffix) {
		t.Errorf("render = %q, its name %d bytes; want %d", path, n, 143-len(freshSuffix))
	}
	tmpl.nameMax = 20
	if _, _, err := tmpl.render("shop." + strings.Repeat("c", 200)); err == nil || !strings.Contains(err.Error(), "leaves no room") {
		t.Errorf("render with no room for a shortened name = %v, want an error", err)
	}
}

// shortenedOf returns the "shortened" field of a templated sink's state.
func shortenedOf(t *testing.T, state []byte) map[string]string {
	t.Helper()
	st, err := decodeTemplateState(state)
	if err != nil {
		t.Fatal(err)
	}
	return st.Shortened
}

// TestLongNamespacesExactlyOnce writes namespaces whose file names are
// too long for the file system, restarts after uncommitted records and a
// torn line, and restarts again with a file renamed under a name the
// checkpoint records.
func TestLongNamespacesExactlyOnce(t *testing.T) {
	t.Parallel()
	long := strings.Repeat
	a := "a." + long("c", 253) // 255 bytes: MongoDB's longest namespace
	nss := []string{
		a,
		"a." + long("c", 252) + "d", // a's first 254 bytes, then another
		long("d", 63) + "." + long("c", 191),
		"shop." + long("/", 84),   // 3 bytes each in a file name
		"shop." + long("€", 83),   // 3 bytes each in UTF-8
		"shop.x" + long("/:", 42), // escapes after an odd byte
		"shop.orders",
	}
	for name, tmpl := range map[string]string{
		"one directory per database": filepath.Join("out", "{db}", "{coll}.jsonl"),
		"one directory":              filepath.Join("out", "{db}.{coll}.jsonl"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tmpl := filepath.Join(dir, tmpl)
			var logs strings.Builder
			s := New(Config{Path: tmpl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			t.Cleanup(func() { s.Close() })
			if err := s.Open(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			putCommit(t, s, nsRecords(1, 7, nss...))
			saved := putCommit(t, s, nsRecords(8, 14, nss...))
			s.CheckpointSaved(saved)

			short := shortenedOf(t, saved.Sink)
			files, err := stateKeys(saved.Sink)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(nss) {
				t.Fatalf("state names %d files, want %d: %s", len(files), len(nss), saved.Sink)
			}
			seen := map[string]string{}
			for _, ns := range nss {
				_, full, err := s.tmpl.render(ns)
				if err != nil {
					t.Fatal(err)
				}
				fullKey, _ := filepath.Rel(s.tmpl.root, full)
				key, ok := short[ns]
				if len(filepath.Base(full))+len(freshSuffix) <= nameMax {
					if ok {
						t.Errorf("namespace %q, short enough, has a shortened file %q", ns, key)
					}
					key = fullKey
				} else if !ok {
					t.Errorf("namespace %.20q..., too long, has no shortened file in the state: %s", ns, saved.Sink)
					continue
				}
				if other, ok := seen[key]; ok {
					t.Errorf("namespaces %.20q... and %.20q... both write %s", ns, other, key)
				}
				seen[key] = ns
				base := filepath.Base(key)
				if !utf8.ValidString(key) || !strings.HasSuffix(key, ".jsonl") || len(base)+len(freshSuffix) > nameMax {
					t.Errorf("file %q: want UTF-8, .jsonl, and room for %s in %d bytes", key, freshSuffix, nameMax)
				}
				if _, ok := files[key]; !ok {
					t.Errorf("state has no file %q: %s", key, saved.Sink)
				}
				if got, want := readFile(t, filepath.Join(s.tmpl.root, key)), nsLines(1, 14, ns, nss...); got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
				if n := strings.Count(logs.String(), "file name shortened"); n != len(short) {
					t.Errorf("logged %d shortened names, want one for each of %d:\n%s", n, len(short), logs.String())
				}
				if ok && !strings.Contains(logs.String(), strings.TrimSuffix(base, ".jsonl")) {
					t.Errorf("log does not name %s:\n%s", base, logs.String())
				}
			}
			if len(short) < 3 {
				t.Fatalf("only %d names shortened: the test is not testing", len(short))
			}

			// Uncommitted records and a torn line: a crash here leaves
			// neither after the restart.
			putCommit(t, s, nsRecords(15, 21, nss...))
			s.Close()
			tornKey := short[a]
			f, err := os.OpenFile(filepath.Join(s.tmpl.root, tornKey), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"seq":99,"torn`)
			f.Close()

			s = newSink(t, tmpl)
			if err := s.Open(t.Context(), &saved); err != nil {
				t.Fatal(err)
			}
			cp := putCommit(t, s, nsRecords(15, 21, nss...))
			if got := shortenedOf(t, cp.Sink); !maps.Equal(got, short) {
				t.Errorf("after a restart, shortened = %v, want %v", got, short)
			}
			for key, ns := range seen {
				if got, want := readFile(t, filepath.Join(s.tmpl.root, key)), nsLines(1, 21, ns, nss...); got != want {
					t.Errorf("after a restart, %s = %q, want %q", key, got, want)
				}
			}
			s.Close()

			// A file the checkpoint records under another name (as an
			// older rule might have made it) keeps that name.
			renamed := filepath.Join(filepath.Dir(tornKey), "renamed.jsonl")
			if err := os.Rename(filepath.Join(s.tmpl.root, tornKey), filepath.Join(s.tmpl.root, renamed)); err != nil {
				t.Fatal(err)
			}
			q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
			cp.Sink = []byte(strings.ReplaceAll(string(cp.Sink), q(tornKey), q(renamed)))
			s = newSink(t, tmpl)
			if err := s.Open(t.Context(), &cp); err != nil {
				t.Fatal(err)
			}
			cp = putCommit(t, s, nsRecords(22, 28, nss...))
			if got := shortenedOf(t, cp.Sink)[a]; got != renamed {
				t.Errorf("file of %.20q... = %q, want the one the checkpoint recorded, %q", a, got, renamed)
			}
			if got, want := readFile(t, filepath.Join(s.tmpl.root, renamed)), nsLines(1, 28, a, nss...); got != want {
				t.Errorf("%s = %q, want %q", renamed, got, want)
			}
			if _, err := os.Stat(filepath.Join(s.tmpl.root, tornKey)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s made again: %v", tornKey, err)
			}
		})
	}
}

// TestShortenedNameNeverShared: a collection named like another's
// shortened file gets an error, not the other's file, in either order.
func TestShortenedNameNeverShared(t *testing.T) {
	t.Parallel()
	longNS := "a." + strings.Repeat("c", 253)
	tmpl := mustTemplate(t, "/out/{db}/{coll}.jsonl")
	path, _, err := tmpl.render(longNS)
	if err != nil {
		t.Fatal(err)
	}
	lookalike := "a." + strings.TrimSuffix(filepath.Base(path), ".jsonl")
	rec := func(ns string) []cdc.Record {
		return []cdc.Record{{Event: cdc.Event{Namespace: ns, Pos: cdc.Position(`{"seq":1}`)}, Data: []byte(`{}`)}}
	}
	for name, tc := range map[string]struct{ first, second, want string }{
		"long first":      {longNS, lookalike, "the shortened file name of namespace"},
		"lookalike first": {lookalike, longNS, "which another namespace writes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSink(t, filepath.Join(t.TempDir(), "{db}", "{coll}.jsonl"))
			if err := s.Open(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			cp := putCommit(t, s, rec(tc.first))
			if err := s.Put(t.Context(), rec(tc.second)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Put of %.20q... after %.20q... = %v, want %q", tc.second, tc.first, err, tc.want)
			}
			// And after a restart.
			s.Close()
			s = newSink(t, s.path)
			if err := s.Open(t.Context(), &cp); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(t.Context(), rec(tc.second)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after a restart, Put of %.20q... = %v, want %q", tc.second, err, tc.want)
			}
		})
	}
}

func TestShortenedStateRefused(t *testing.T) {
	t.Parallel()
	for bad, want := range map[string]string{
		`{"files":{"a.jsonl":[0,0,0,0,0]},"shortened":{"d.c":"b.jsonl"}}`:                 "does not name among its files",
		`{"files":{"a.jsonl":[0,0,0,0,0]},"shortened":{"":"a.jsonl"}}`:                    "does not name among its files",
		`{"files":{"a.jsonl":[0,0,0,0,0]},"shortened":{"d.c":"a.jsonl","d.e":"a.jsonl"}}`: `namespaces "d.c" and "d.e" the same file`,
		`{"files":{"a.jsonl":[0,0,0,0,0]},"shortened":{"d.c":"a.jsonl"},"other":1}`:       `is not {"files": {...}}`,
		`{"files":{"a.jsonl":[0,0,0,0,0]},"shortened":["a.jsonl"]}`:                       `is not {"files": {...}}`,
	} {
		s := newSink(t, filepath.Join(t.TempDir(), "{coll}.jsonl"))
		if err := s.Open(t.Context(), &cdc.Checkpoint{Sink: []byte(bad)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open with state %s = %v, want %q", bad, err, want)
		}
	}
}

// TestShortenedToRealPathMax writes under a directory so deep that a
// namespace's path passes PATH_MAX unless shortened.
func TestShortenedToRealPathMax(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for len(root) < pathMax-150 {
		root = filepath.Join(root, strings.Repeat("r", min(200, pathMax-150-len(root))))
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Skipf("cannot make a directory %d bytes long: %v", len(root), err)
	}
	ns := "shop." + strings.Repeat("c", 200)
	tmpl := filepath.Join(root, "{db}", "{coll}.jsonl")
	s := newSink(t, tmpl)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	saved := putCommit(t, s, nsRecords(1, 5, ns))
	key := shortenedOf(t, saved.Sink)[ns]
	if key == "" || len(filepath.Join(root, key))+len(freshSuffix) > pathMax-1 {
		t.Fatalf("shortened file %q, want one whose path fits in %d bytes: %s", key, pathMax-1, saved.Sink)
	}
	putCommit(t, s, nsRecords(6, 9, ns))
	s.Close()
	s = newSink(t, tmpl)
	if err := s.Open(t.Context(), &saved); err != nil {
		t.Fatal(err)
	}
	putCommit(t, s, nsRecords(6, 7, ns))
	if got, want := readFile(t, filepath.Join(root, key)), nsLines(1, 7, ns, ns); got != want {
		t.Errorf("%s = %q, want %q", key, got, want)
	}
}
