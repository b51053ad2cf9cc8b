package file

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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
