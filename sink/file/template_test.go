package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/cdc"
)

// nsRecords returns records from to to, record i in namespace nss[i%len(nss)].
func nsRecords(from, to int, nss ...string) []cdc.Record {
	rs := records(from, to)
	for i := range rs {
		rs[i].Namespace = nss[(from+i)%len(nss)]
		rs[i].Data = fmt.Appendf(nil, `{"seq":%d,"ns":%q}`, from+i, rs[i].Namespace)
	}
	return rs
}

// nsLines is what the file of namespace ns holds after records from to to.
func nsLines(from, to int, ns string, nss ...string) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		if nss[i%len(nss)] == ns {
			fmt.Fprintf(&b, "{\"seq\":%d,\"ns\":%q}\n", i, ns)
		}
	}
	return b.String()
}

func TestTemplateOneFilePerNamespace(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "out", "{db}", "{coll}.jsonl")
	nss := []string{"shop.orders", "shop.customers", "crm.leads"}
	files := map[string]string{
		"shop.orders":    filepath.Join(dir, "out", "shop", "orders.jsonl"),
		"shop.customers": filepath.Join(dir, "out", "shop", "customers.jsonl"),
		"crm.leads":      filepath.Join(dir, "out", "crm", "leads.jsonl"),
	}
	s := newSink(t, tmpl)
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	saved := putCommit(t, s, nsRecords(1, 9, nss...))
	for ns, path := range files {
		if got, want := readFile(t, path), nsLines(1, 9, ns, nss...); got != want {
			t.Errorf("%s holds %q, want %q", path, got, want)
		}
	}
	st, err := stateKeys(saved.Sink)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"shop/orders.jsonl", "shop/customers.jsonl", "crm/leads.jsonl"} {
		if n := st[key][0]; n != int64(len(readFile(t, filepath.Join(dir, "out", key)))) {
			t.Errorf("state of %s = %v, want the file's length first: %s", key, st[key], saved.Sink)
		}
	}
	// Put but not committed, and a namespace first used after the
	// checkpoint: a crash here must leave neither.
	if err := s.Put(t.Context(), nsRecords(10, 14, append(nss, "crm.new")...)); err != nil {
		t.Fatal(err)
	}
	newFile := filepath.Join(dir, "out", "crm", "new.jsonl")
	if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	s.Close() // the checkpoint naming records 10-14 was never saved

	s = newSink(t, tmpl)
	if err := s.Open(t.Context(), &saved); err != nil {
		t.Fatal(err)
	}
	for ns, path := range files {
		if got, want := readFile(t, path), nsLines(1, 9, ns, nss...); got != want {
			t.Errorf("after restart, %s holds %q, want its committed lines %q", path, got, want)
		}
	}
	for _, p := range []string{newFile, newFile + freshSuffix} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, made after the last checkpoint, is still there: %v", p, err)
		}
	}
	all := append(nss, "crm.new")
	cp := putCommit(t, s, nsRecords(10, 14, all...))
	s.CheckpointSaved(cp)
	if got, want := readFile(t, newFile), nsLines(10, 14, "crm.new", all...); got != want {
		t.Errorf("%s = %q, want %q", newFile, got, want)
	}
	if _, err := os.Stat(newFile + freshSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("marker of %s outlived the checkpoint naming it: %v", newFile, err)
	}
	for ns, path := range files {
		want := nsLines(1, 9, ns, nss...) + nsLines(10, 14, ns, all...)
		if got := readFile(t, path); got != want {
			t.Errorf("%s holds %q, want %q", path, got, want)
		}
	}
}

// TestTemplateMarkerOfLaterFileKept: a checkpoint saved late (it names
// the batch before a file's first use) must not remove that file's
// marker.
func TestTemplateMarkerOfLaterFileKept(t *testing.T) {
	dir := t.TempDir()
	s := newSink(t, filepath.Join(dir, "{coll}.jsonl"))
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	first := putCommit(t, s, nsRecords(1, 2, "d.a"))
	putCommit(t, s, nsRecords(3, 4, "d.b"))
	s.CheckpointSaved(first) // the saver trails the committer
	if _, err := os.Stat(filepath.Join(dir, "b.jsonl"+freshSuffix)); err != nil {
		t.Fatalf("b's marker went with a checkpoint that does not name b: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.jsonl"+freshSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a's marker outlived a checkpoint naming a: %v", err)
	}
}

func TestTemplateNeverEscapesItsDirectory(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	s := newSink(t, filepath.Join(root, "{db}", "{coll}.jsonl"))
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	nss := []string{"..", "x.../../etc/passwd", "%2E%2E.x", "shop.a/../../../x", "shop.\x00nul", "shop..hidden", "c:\\d.e%f", "shop.with.dots"}
	var rs []cdc.Record
	for i, ns := range nss {
		rs = append(rs, cdc.Record{Event: cdc.Event{Namespace: ns, Pos: cdc.Position(fmt.Sprintf(`{"seq":%d}`, i))}, Data: []byte(`{}`)})
	}
	// ".." has no database: refused, naming it.
	err := s.Put(t.Context(), rs[:1])
	if err == nil || !strings.Contains(err.Error(), `namespace ".." has no database name`) {
		t.Fatalf("Put of namespace \"..\" = %v, want a refusal naming it", err)
	}
	if err := s.Put(t.Context(), rs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, freshSuffix) && !strings.HasSuffix(path, lockSuffix) {
			rel, _ := filepath.Rel(dir, path)
			got = append(got, rel)
		}
		return nil
	})
	sort.Strings(got)
	want := []string{
		"root/%252E%252E/x.jsonl",
		"root/c%3A%5Cd/e%25f.jsonl",
		"root/shop/%00nul.jsonl",
		"root/shop/%2Ehidden.jsonl",
		"root/shop/a%2F..%2F..%2F..%2Fx.jsonl",
		"root/shop/with.dots.jsonl",
		"root/x/%2E.%2F..%2Fetc%2Fpasswd.jsonl",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTemplateBoundsOpenFiles writes to more namespaces than the sink
// may hold open, interleaved, with restarts: every file ends with its
// own records, in order.
func TestTemplateBoundsOpenFiles(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "{db}-{coll}.jsonl")
	nss := []string{"a.1", "a.2", "a.3", "b.1", "b.2"}
	var saved *cdc.Checkpoint
	for run := range 3 {
		s := newSink(t, tmpl)
		s.maxOpen = 2
		if err := s.Open(t.Context(), saved); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		from := run*20 + 1
		putCommit(t, s, nsRecords(from, from+9, nss...))
		if s.open.Len() > 2 {
			t.Fatalf("%d files open, want at most 2", s.open.Len())
		}
		cp := putCommit(t, s, nsRecords(from+10, from+19, nss...))
		saved = &cp
		// Uncommitted, cut by the next Open.
		if err := s.Put(t.Context(), nsRecords(from+20, from+24, nss...)); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	for _, ns := range nss {
		db, coll, _ := strings.Cut(ns, ".")
		path := filepath.Join(dir, db+"-"+coll+".jsonl")
		s := newSink(t, tmpl)
		if err := s.Open(t.Context(), saved); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got, want := readFile(t, path), nsLines(1, 60, ns, nss...); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
}

func TestTemplateStateMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	single := &cdc.Checkpoint{Sink: []byte(`{"committed_bytes":0}`)}
	s := newSink(t, filepath.Join(dir, "{coll}.jsonl"))
	if err := s.Open(t.Context(), single); err == nil || !strings.Contains(err.Error(), "single file, but the path now has {db} or {coll}") {
		t.Fatalf("templated Open with a single file's state = %v, want a refusal", err)
	}
	multi := &cdc.Checkpoint{Sink: []byte(`{"files":{"a.jsonl":[0,0,0,0,0]}}`)}
	s = newSink(t, filepath.Join(dir, "one.jsonl"))
	if err := s.Open(t.Context(), multi); err == nil || !strings.Contains(err.Error(), "one file per namespace, but the path has no {db} or {coll}") {
		t.Fatalf("single-file Open with a templated state = %v, want a refusal", err)
	}
	for _, bad := range []string{`{"files":{"../x":[0,0,0,0,0]}}`, `{"files":{"a":[-1,0,0,0,0]}}`, `{"files":{"a":[1,0,0,0]}}`, `{"files":1}`} {
		s = newSink(t, filepath.Join(dir, "{coll}.jsonl"))
		if err := s.Open(t.Context(), &cdc.Checkpoint{Sink: []byte(bad)}); err == nil {
			t.Errorf("Open with state %s succeeded", bad)
		}
	}
	// A committed file that is gone is data loss, named.
	s = newSink(t, filepath.Join(dir, "{coll}.jsonl"))
	err := s.Open(t.Context(), &cdc.Checkpoint{Sink: []byte(`{"files":{"gone.jsonl":[10,0,0,0,0]}}`)})
	if err == nil || !strings.Contains(err.Error(), "gone.jsonl is 0 bytes but the checkpoint says 10 bytes were committed") {
		t.Fatalf("Open with a committed file missing = %v", err)
	}
}

func TestTemplateLockCoversTheRoot(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "{db}", "{coll}.jsonl")
	first := ownedSink(t, tmpl, "alpha", dir)
	if err := first.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var inUse *InUseError
	if err := ownedSink(t, filepath.Join(dir, "{coll}.other"), "beta", dir).Open(t.Context(), nil); !errors.As(err, &inUse) || inUse.Pipeline != "alpha" {
		t.Fatalf("a second templated sink in the same directory: Open = %v, want an InUseError naming alpha", err)
	}
}

func TestTemplateValidate(t *testing.T) {
	for path, want := range map[string]string{
		"out/{namespace}.jsonl": "{namespace} is not a placeholder of the file sink; use {db} and {coll}",
		"out/{op}/{coll}.jsonl": "{op} is not a placeholder",
		"out/{db}/{coll}.jsonl": "",
		"out/{other}.jsonl":     "", // literal text, as before
	} {
		err := Config{Path: path}.Validate()
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) || err != nil && !strings.HasPrefix(err.Error(), "path: ") {
			t.Errorf("Validate(%q) = %v, want %q", path, err, want)
		}
		if want != "" {
			if err := New(Config{Path: filepath.Join(t.TempDir(), path)}).Open(t.Context(), nil); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q) = %v, want %q", path, err, want)
			}
		}
	}
}
