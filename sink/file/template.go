package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-cdc/tide/cdc"
)

// template is a path with {db} and {coll} placeholders.
type template struct {
	parts []string // literal text and "{db}" / "{coll}" / "{route}", in order
	route bool     // the path holds {route}: files are per namespace and route
	root  string   // the directory before the first placeholder
	glob  string   // every path the template can render, as a filepath.Match pattern

	// The longest file name and path the file system takes, in bytes;
	// Open sets them from the root's file system.
	nameMax, pathMax int
}

// parseTemplate returns nil, nil for a path without placeholders. The
// NATS sink's {namespace} and {op} are refused rather than taken as
// literal text, which would send every namespace to one file.
func parseTemplate(path string) (*template, error) {
	for _, p := range []string{"{namespace}", "{op}"} {
		if strings.Contains(path, p) {
			return nil, fmt.Errorf("%q: %s is not a placeholder of the file sink; use {db} and {coll}", path, p)
		}
	}
	if !strings.Contains(path, "{db}") && !strings.Contains(path, "{coll}") && !strings.Contains(path, "{route}") {
		return nil, nil
	}
	t := &template{nameMax: nameMax, pathMax: pathMax, route: strings.Contains(path, "{route}")}
	var glob strings.Builder
	rest := path
	first := -1
	for rest != "" {
		i, name := nextPlaceholder(rest)
		if i < 0 {
			t.parts = append(t.parts, rest)
			glob.WriteString(escapeGlob(rest))
			break
		}
		if first < 0 {
			first = len(path) - len(rest) + i
		}
		if i > 0 {
			t.parts = append(t.parts, rest[:i])
			glob.WriteString(escapeGlob(rest[:i]))
		}
		t.parts = append(t.parts, name)
		glob.WriteByte('*')
		rest = rest[i+len(name):]
	}
	t.root = filepath.Dir(path[:first] + "x")
	t.glob = glob.String()
	return t, nil
}

// nextPlaceholder returns the index and name of the first placeholder in
// s, or -1.
func nextPlaceholder(s string) (int, string) {
	at, name := -1, ""
	for _, p := range []string{"{db}", "{coll}", "{route}"} {
		if i := strings.Index(s, p); i >= 0 && (at < 0 || i < at) {
			at, name = i, p
		}
	}
	return at, name
}

// routeSep joins a namespace and a route into the key of a file of a
// template with {route}: neither holds a NUL byte.
const routeSep = "\x00"

// fileKey is the key r's file is found by: its namespace, and its route
// when the template has {route}.
func (t *template) fileKey(r *cdc.Record) string {
	if t == nil || !t.route {
		return r.Namespace
	}
	return r.Namespace + routeSep + r.Route
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// render returns the file of namespace ns, and the file it would be if
// no name were shortened to fit the file system (shortenPath).
func (t *template) render(key string) (path, full string, err error) {
	ns, route := key, ""
	if t.route { // a namespace may hold a NUL byte; fileKey put the route last
		i := strings.LastIndex(key, routeSep)
		ns, route = key[:i], key[i+len(routeSep):]
	}
	db, coll, _ := strings.Cut(ns, ".")
	var b strings.Builder
	var vals []span
	for _, p := range t.parts {
		var v, what string
		switch p {
		case "{db}":
			v, what = db, "database"
		case "{coll}":
			v, what = coll, "collection"
		case "{route}":
			if route == "" {
				return "", "", fmt.Errorf("namespace %q: the change has no route to fill {route}: a route transform sets it", ns)
			}
			v, what = route, "route"
		default:
			b.WriteString(p)
			continue
		}
		if v == "" {
			return "", "", fmt.Errorf("namespace %q has no %s name to fill %s", ns, what, p)
		}
		start := b.Len()
		escapePart(&b, v)
		vals = append(vals, span{start, b.Len()})
	}
	short, err := t.shortenPath(b.String(), vals)
	if err != nil {
		return "", "", fmt.Errorf("namespace %q: %w", ns, err)
	}
	path, full = filepath.Clean(short), filepath.Clean(b.String())
	rel, err := filepath.Rel(t.root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || rel == "." {
		return "", "", fmt.Errorf("namespace %q names %s, outside the template's directory %s", ns, path, t.root)
	}
	if strings.HasSuffix(path, freshSuffix) || strings.HasSuffix(path, lockSuffix) {
		return "", "", fmt.Errorf("namespace %q names %s, which ends like the sink's own bookkeeping files (%s, %s)", ns, path, freshSuffix, lockSuffix)
	}
	return path, full, nil
}

// escapePart writes a namespace part so that it is one plain path
// element: '/', '\', '%', ':', control bytes and a leading '.' (which
// could make "." or "..") are percent-encoded.
func escapePart(b *strings.Builder, v string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == '%' || c == ':' || (i == 0 && c == '.') {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// fileState is one file's entry in a templated sink's state:
// [committed_bytes, head_bytes, head_crc32c, tail_bytes, tail_crc32c].
type fileState [5]int64

// templateStateJSON is a templated sink's part of the checkpoint.
type templateStateJSON struct {
	Files map[string]fileState `json:"files"`

	// Shortened names the file of each namespace whose file name was
	// shortened to fit the file system (shortenPath), by its path under
	// the root: a restart writes the same file, whatever the rule then.
	Shortened map[string]string `json:"shortened,omitempty"`
}

func isTemplateState(b []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(b), []byte(`{"files"`))
}

// stateKeys returns the files a templated sink's state names.
func stateKeys(b []byte) (map[string]fileState, error) {
	st, err := decodeTemplateState(b)
	return st.Files, err
}

func decodeTemplateState(b []byte) (templateStateJSON, error) {
	var st templateStateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || st.Files == nil {
		return st, fmt.Errorf(`checkpoint sink state %.100q is not {"files": {...}}: it was not written by a file sink with {db} or {coll} in its path`, b)
	}
	return st, nil
}

// parseTemplateState returns the files and their committed lengths and
// checksums in a templated sink's state, and the namespace of each file
// whose name was shortened.
func parseTemplateState(b []byte) (map[string]fileState, map[string]string, error) {
	if !isTemplateState(b) {
		if _, _, _, err := restoredLength(&cdc.Checkpoint{Sink: b}); err == nil {
			return nil, nil, errors.New("checkpoint sink state is of a single file, but the path now has {db} or {coll}: " +
				"set the path back, or reset the checkpoint (and move the old file aside) to start over")
		}
	}
	st, err := decodeTemplateState(b)
	if err != nil {
		return nil, nil, err
	}
	for key, fs := range st.Files {
		n := fs[0]
		limit := min(n, maxCheckLen)
		if n < 0 || fs[1] < 0 || fs[1] > limit || fs[3] < 0 || fs[3] > limit || fs[2] < 0 || fs[2] > 1<<32-1 || fs[4] < 0 || fs[4] > 1<<32-1 {
			return nil, nil, fmt.Errorf("checkpoint sink state of %s is not [committed_bytes, head_bytes, head_crc32c, tail_bytes, tail_crc32c]: %v", key, fs)
		}
		if !filepath.IsLocal(key) {
			return nil, nil, fmt.Errorf("checkpoint sink state names %q, which is not a path under the template's directory", key)
		}
	}
	nsOf := make(map[string]string, len(st.Shortened))
	for ns, key := range st.Shortened {
		if _, ok := st.Files[key]; !ok || ns == "" {
			return nil, nil, fmt.Errorf("checkpoint sink state gives namespace %q the shortened file %q, which it does not name among its files", ns, key)
		}
		if other, ok := nsOf[key]; ok {
			return nil, nil, fmt.Errorf("checkpoint sink state gives namespaces %q and %q the same file %q", min(ns, other), max(ns, other), key)
		}
		nsOf[key] = ns
	}
	return st.Files, nsOf, nil
}

func (fs fileState) sums() *checksums {
	return &checksums{headLen: fs[1], headCRC: uint32(fs[2]), tailLen: fs[3], tailCRC: uint32(fs[4])}
}

// openTemplate is Open, under the lock, of a path with placeholders: it
// cuts every file the checkpoint names back to its committed length,
// and removes the files this pipeline created after its last checkpoint.
func (s *Sink) openTemplate(_ context.Context, restored *cdc.Checkpoint) error {
	var files map[string]fileState
	var nsOf map[string]string
	if restored != nil && len(restored.Sink) > 0 {
		var err error
		if files, nsOf, err = parseTemplateState(restored.Sink); err != nil {
			return fmt.Errorf("file sink %s: %w", s.path, err)
		}
	}
	s.files = make(map[string]*target, len(files))
	s.byNS = map[string]*target{}
	s.short = map[string]*target{}
	s.pending = map[string]*target{}
	if err := s.removeUncheckpointed(files); err != nil {
		return err
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		fst := files[key]
		t := &target{path: filepath.Join(s.tmpl.root, key), key: key, ns: nsOf[key]}
		if t.ns != "" {
			s.short[t.ns] = t
		}
		if fst[0] == 0 {
			if _, err := os.Stat(t.path); errors.Is(err, fs.ErrNotExist) {
				t.sums = *fst.sums()
				s.addFile(t)
				continue // named with nothing committed; made again on first use
			}
		}
		if _, err := s.openFile(t, fst[0], fst.sums(), true); err != nil {
			return err
		}
		s.addFile(t)
		if err := s.closeTarget(t); err != nil { // reopened on first use
			return err
		}
	}
	return nil
}

// removeUncheckpointed removes each file that carries this pipeline's
// fresh-file marker but is not in files: it was created after the last
// saved checkpoint, so everything in it is uncommitted, and the source
// sends its events again. The marker goes once the file is gone; a crash
// in between leaves the marker, and the next Open finishes.
func (s *Sink) removeUncheckpointed(files map[string]fileState) error {
	markers, err := filepath.Glob(s.tmpl.glob + freshSuffix)
	if err != nil {
		return fmt.Errorf("file sink: list fresh-file markers: %w", err)
	}
	for _, marker := range markers {
		path := strings.TrimSuffix(marker, freshSuffix)
		key, err := filepath.Rel(s.tmpl.root, path)
		if err != nil {
			continue
		}
		if _, ok := files[key]; ok {
			continue // openFile removes the marker of a restored file
		}
		o := readOwner(marker)
		if o != (owner{}) && !o.same(s.owner) {
			continue // another pipeline's: first use refuses its bytes
		}
		if err := s.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: remove %s, created after the last checkpoint: %w", path, err)
		}
		if err := s.fs.SyncDir(filepath.Dir(path)); err != nil {
			return fmt.Errorf("file sink: sync directory: %w", err)
		}
		if err := s.fs.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: %w", err)
		}
		s.log.Info("removed a file created after the last checkpoint", "file", path)
	}
	return nil
}

// resolve returns r's file, open for appending.
func (s *Sink) resolve(r *cdc.Record) (*target, error) {
	key := s.tmpl.fileKey(r)
	t, ok := s.byNS[key]
	if !ok {
		var err error
		if t, err = s.fileOf(key); err != nil {
			return nil, fmt.Errorf("file sink %s: record at position %s: %w", s.path, r.Pos, err)
		}
		if len(s.byNS) >= maxNamespaces {
			clear(s.byNS) // a cache: rendering again is cheap
		}
		s.byNS[key] = t
	}
	if t.f != nil {
		s.open.MoveToFront(t.elem)
		return t, nil
	}
	if err := s.reopen(t); err != nil {
		return nil, err
	}
	return t, nil
}

// fileOf returns the file of namespace ns. A file the checkpoint names
// keeps its name: a shortened one by the namespace it records, another
// by its full name, even if the rule or the file system's limit have
// changed since. A shortened name that another namespace's file has, or
// the reverse, is refused: the two would mix their lines.
func (s *Sink) fileOf(ns string) (*target, error) {
	if t, ok := s.short[ns]; ok {
		return t, nil
	}
	path, full, err := s.tmpl.render(ns)
	if err != nil {
		return nil, err
	}
	fullKey, _ := filepath.Rel(s.tmpl.root, full) // render checked path, the same but for the names, is under the root
	if t, ok := s.files[fullKey]; ok && t.ns == "" {
		return t, nil
	}
	key, _ := filepath.Rel(s.tmpl.root, path)
	t, ok := s.files[key]
	switch {
	case ok && t.ns != "":
		return nil, fmt.Errorf("namespace %q names %s, the shortened file name of namespace %q", ns, path, t.ns)
	case ok:
		return nil, fmt.Errorf("namespace %q, shortened to fit the file system, names %s, which another namespace writes", ns, path)
	case path == full:
		return &target{path: path, key: key}, nil
	}
	t = &target{path: path, key: key, ns: ns}
	s.short[ns] = t
	s.log.Info("file sink: file name shortened to fit the file system; the checkpoint records it",
		"namespace", ns, "file", path)
	return t, nil
}

// maxNamespaces bounds the namespace cache.
const maxNamespaces = 1 << 16

// reopen opens t's file, creating it on first use, and makes room under
// maxOpen.
func (s *Sink) reopen(t *target) error {
	for s.open.Len() >= s.maxOpen {
		if err := s.closeTarget(s.open.Back().Value.(*target)); err != nil {
			return err
		}
	}
	if _, known := s.files[t.key]; !known {
		fresh, err := s.openFile(t, 0, nil, false)
		if err != nil {
			return err
		}
		s.addFile(t)
		if fresh {
			s.mu.Lock()
			s.pending[t.key] = t
			s.mu.Unlock()
		}
	} else {
		_, statErr := os.Stat(t.path)
		if errors.Is(statErr, fs.ErrNotExist) {
			if err := s.mkdirAll(filepath.Dir(t.path)); err != nil {
				return err
			}
		}
		f, err := s.fs.OpenFile(t.path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			// Named by the checkpoint with nothing committed, and gone:
			// its new name must be durable before bytes in it are.
			if err := s.fs.SyncDir(filepath.Dir(t.path)); err != nil {
				f.Close()
				return fmt.Errorf("file sink: sync directory: %w", err)
			}
		}
		if err := s.verifyEnds(t, f, t.written, &t.sums); err != nil {
			f.Close()
			return err
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != t.written {
			f.Close()
			return fmt.Errorf("file sink %s changed while the sink had it closed: want %d bytes: %v", t.path, t.written, err)
		}
		if _, err := f.Seek(t.written, 0); err != nil {
			f.Close()
			return fmt.Errorf("file sink: %w", err)
		}
		t.f, t.w = f, bufio.NewWriterSize(f, templateBufferSize)
	}
	t.elem = s.open.PushFront(t)
	return nil
}

// closeTarget closes t to make room for another file. What was written
// to it is flushed and fsynced first: the fsync of a later descriptor
// might not report an error of this one's writes.
func (s *Sink) closeTarget(t *target) error {
	if t.written != t.committed || t.w.Buffered() > 0 {
		if err := t.w.Flush(); err != nil {
			return fmt.Errorf("file sink: write: %w", err) // the *PathError names the file
		}
		if err := t.f.Sync(); err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
	}
	t.sums = t.ends.sums()
	t.ends = ends{}
	err := t.f.Close()
	if t.elem != nil {
		s.open.Remove(t.elem)
	}
	t.f, t.w, t.elem = nil, nil, nil
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// addFile makes t one of the files of the state.
func (s *Sink) addFile(t *target) {
	s.files[t.key] = t
	i, _ := slices.BinarySearch(s.keys, t.key)
	s.keys = slices.Insert(s.keys, i, t.key)
}

// templateState is State with a template.
func (s *Sink) templateState() []byte {
	b := make([]byte, 0, 16+len(s.keys)*80)
	b = append(b, `{"files":{`...)
	for i, k := range s.keys {
		t := s.files[k]
		if i > 0 {
			b = append(b, ',')
		}
		q, _ := json.Marshal(k) // a string always marshals
		b = append(b, q...)
		sums := t.sums
		if t.f != nil {
			sums = t.ends.sums()
		}
		b = append(b, ":["...)
		b = strconv.AppendInt(b, t.written, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, sums.headLen, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(sums.headCRC), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, sums.tailLen, 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(sums.tailCRC), 10)
		b = append(b, ']')
	}
	b = append(b, '}')
	if len(s.short) > 0 {
		b = s.appendShortened(b)
	}
	return append(b, '}')
}

// appendShortened appends the state's "shortened" field: the namespace
// of each file whose name was shortened, if there is one.
func (s *Sink) appendShortened(b []byte) []byte {
	first := true
	for _, k := range s.keys {
		t := s.files[k]
		if t.ns == "" {
			continue
		}
		if first {
			b = append(b, `,"shortened":{`...)
			first = false
		} else {
			b = append(b, ',')
		}
		q, _ := json.Marshal(t.ns) // a string always marshals
		b = append(b, q...)
		b = append(b, ':')
		q, _ = json.Marshal(k)
		b = append(b, q...)
	}
	if !first {
		b = append(b, '}')
	}
	return b
}
