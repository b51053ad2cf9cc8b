//go:build unix

package tide

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/tide-cdc/tide/internal/config"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// billionLaughs returns a pipeline file whose aliases nest levels deep,
// each level repeating the one below nine times: 9^levels values once
// expanded, from a file of a few hundred bytes.
func billionLaughs(levels int) string {
	var b strings.Builder
	b.WriteString("name: lol\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= levels; i++ {
		prev := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Repeat(prev+", ", 8)+prev)
	}
	fmt.Fprintf(&b, "source: {mongo: {uri: embedded, database: d, collection: c, pipeline: [{$match: {x: *l%d}}]}}\nsink: {stdout: {}}\n", levels)
	return b.String()
}

// A billion laughs is refused at once, in bounded memory, naming the
// alias and its line; it used to be expanded into the pipeline's JSON.
// (Not parallel: it measures the allocations of the process.)
func TestParseRefusesBillionLaughs(t *testing.T) {
	text := []byte(billionLaughs(9)) // 9^9: 387 million values
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	_, err := Parse(text, Options{Getenv: specEnv(nil)})
	goruntime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("Parse accepted a billion laughs")
	}
	for _, want := range []string{"line 7: alias *l4 expands the file beyond 200000 values", "billion laughs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("Parse allocated %d MiB to refuse a file of %d bytes", alloc>>20, len(text))
	}
}

// Aliases that repeat a setting, the everyday use, are still accepted,
// and so is an expansion up to the limit.
func TestParseAcceptsModestAliases(t *testing.T) {
	t.Parallel()
	text := `name: p
source: {mongo: {uri: embedded, database: d, collection: c, pipeline: [&m {$match: {status: paid}}, *m]}}
sink: {stdout: {}}
`
	s, err := parseSpec(text, nil)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	m := sectionConfig[*mongosource.Config](t, s.Source, "mongo")
	if got, want := string(m.Pipeline), `[{"$match":{"status":"paid"}},{"$match":{"status":"paid"}}]`; got != want {
		t.Errorf("pipeline = %s, want %s", got, want)
	}
	// Four levels, about 66000 values, used twice: under the limit,
	// refused only for the unknown keys.
	_, err = parseSpec(billionLaughs(4), nil)
	if err == nil || strings.Contains(err.Error(), "alias") || !strings.Contains(err.Error(), "l4: unknown key") {
		t.Fatalf("Parse of a 130000-value expansion = %v, want only unknown keys", err)
	}
}

// ParseFile reads only regular files: a device, a directory or a FIFO is
// refused by name before it is opened (opening a FIFO would block).
func TestParseFileRefusesNonRegularFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct{ path, what string }{
		"/dev/zero": {"/dev/zero", "is a character device"},
		"directory": {dir, "is a directory"},
		"fifo":      {fifo, "is a named pipe (FIFO)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := "pipeline file " + tc.path + " " + tc.what
			_, err := ParseFile(tc.path, Options{})
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "regular") {
				t.Fatalf("ParseFile(%s) = %v, want %q and a regular file asked for", tc.path, err, want)
			}
			// ReadFile, for a program that parses the text itself, too.
			if _, err := ReadFile(tc.path); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("ReadFile(%s) = %v, want %q", tc.path, err, want)
			}
		})
	}
}

// A file over config.MaxFileBytes is refused, naming the file and the
// cap; one of exactly MaxFileBytes is read.
func TestParseFileCapsFileSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	head := "name: p\nsource: {generate: {}}\nsink: {stdout: {}}\n#"
	at := filepath.Join(dir, "at-limit.yaml")
	body := head + strings.Repeat("x", config.MaxFileBytes-len(head)-1) + "\n"
	if err := os.WriteFile(at, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(at, Options{}); err != nil {
		t.Fatalf("ParseFile of a %d-byte file = %v, want it read", len(body), err)
	}
	over := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(over, []byte(body+"#"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ParseFile(over, Options{})
	if err == nil || !strings.Contains(err.Error(), "pipeline file "+over+" is 4194305 bytes, larger than 4 MiB") {
		t.Fatalf("ParseFile of a file over the cap = %v, want the file, its size and the 4 MiB cap named", err)
	}
}
