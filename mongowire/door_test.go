package mongowire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rawStoreOwners are the files that may name the Server's raw store
// (rawStore, or any other field of Server of type *store.Store), and why.
// Every other file, and every command handler, reaches the data through
// Server.data (data.go), whose view sends a transaction's statements to
// the transaction. Keep the list short: a new entry is a new place where
// the transaction rule must be remembered.
var rawStoreOwners = map[string]string{
	"server.go":      "opens the store at Start and closes it at Close",
	"data.go":        "the door itself: Server.data builds the view over it",
	"dispatch.go":    "every reply's cluster time, the journal's health and the fsync of a journaled write: no documents",
	"txn.go":         "begins, commits and aborts the transactions the view routes statements to",
	"auth_users.go":  "loads and writes admin.system.users for authentication, which never runs in a transaction",
	"readconcern.go": "reads the cluster time to check readConcern before the handler runs",
	"hint.go":        "checks a hint against the catalogue before the handler runs",
	"views.go":       "refuses a write to a view before the handler runs",
	"local_db.go":    "renders the local database from the replica-set id and the oplog's size",
	"tailable.go":    "a tailable cursor reads the oplog or a capped collection across getMores; no transaction runs one",
	// A known gap: store.Txn has no FindRecords, so a find with returnKey
	// or showRecordId inside a transaction reads the committed data.
	"find_records.go": "find's returnKey and showRecordId need record ids, which only the store gives",
}

// outsideTxnUsers are the handler files that may call view.outsideTxn,
// and why.
var outsideTxnUsers = map[string]string{
	"cmd_changestream.go": "a change stream reads the oplog and committed documents; $changeStream is refused in a transaction",
}

// isHandlerFile reports whether name holds command handlers: the files
// the door is for.
func isHandlerFile(name string) bool {
	return strings.HasPrefix(name, "cmd_") || strings.HasPrefix(name, "stage_")
}

// doorViolations returns how the Go source src of the package file name
// reaches past the door: naming one of raw, the Server's fields of type
// *store.Store, outside rawStoreOwners,
// calling view.outsideTxn outside outsideTxnUsers, or, in a handler file,
// naming the type store.Store (which would let it hold the raw store),
// unless it is one of outsideTxnUsers.
func doorViolations(f *ast.File, fset *token.FileSet, name string, raw map[string]bool) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pos := fset.Position(sel.Pos())
		if raw[sel.Sel.Name] {
			if _, ok := rawStoreOwners[name]; !ok {
				out = append(out, pos.String()+": names the raw store ("+sel.Sel.Name+"); use s.data(ctx)")
			}
		}
		switch sel.Sel.Name {
		case "outsideTxn":
			if _, ok := outsideTxnUsers[name]; !ok && name != "data.go" {
				out = append(out, pos.String()+": calls outsideTxn, which bypasses transactions; use s.data(ctx), or add the file to outsideTxnUsers with the reason")
			}
		case "Store":
			_, bypasses := outsideTxnUsers[name]
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "store" && isHandlerFile(name) && !bypasses {
				out = append(out, pos.String()+": a handler names store.Store; take the view (s.data(ctx)) or one of its interfaces")
			}
		}
		return true
	})
	return out
}

// rawStoreFields returns the names of the fields of type *store.Store of
// the struct type Server in files, so that the check follows a rename.
func rawStoreFields(files []*ast.File) map[string]bool {
	raw := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Server" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, field := range st.Fields.List {
				star, ok := field.Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "store" {
						for _, n := range field.Names {
							raw[n.Name] = true
						}
					}
				}
			}
			return false
		})
	}
	return raw
}

// TestHandlersUseTheDoor fails when a file of the package reaches the raw
// store rather than the transaction-aware view: a vet-style check over the
// source, so that the transaction rule lives in data.go rather than in
// every handler's author's memory.
func TestHandlersUseTheDoor(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	handlers := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if isHandlerFile(name) {
			handlers++
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	raw := rawStoreFields(slices.Collect(maps.Values(files)))
	if len(raw) == 0 {
		t.Fatal("Server has no field of type *store.Store: where did the store go? Update this check")
	}
	for name, f := range files {
		for _, b := range doorViolations(f, fset, name, raw) {
			t.Error(b)
		}
	}
	if handlers < 30 {
		t.Fatalf("found %d handler files (cmd_*.go, stage_*.go), want at least 30: is the test running in the package directory?", handlers)
	}
	// A stale entry widens the door for nothing.
	for _, list := range []map[string]string{rawStoreOwners, outsideTxnUsers} {
		for name := range list {
			if !slices.Contains(names, name) {
				t.Errorf("allow-list names %s, which does not exist: remove it", name)
			}
		}
	}
}

// TestDoorViolations checks that the check catches what it is for.
func TestDoorViolations(t *testing.T) {
	tests := map[string]struct {
		name, src string
		want      int
	}{
		"handler uses the view": {"cmd_x.go", `package mongowire
func (s *Server) cmdX(ctx context.Context) { s.data(ctx).Find(ns, spec) }`, 0},
		"handler names the raw store": {"cmd_x.go", `package mongowire
func (s *Server) cmdX() { s.rawStore.Find(ns, spec) }`, 1},
		"helper names the raw store": {"helper.go", `package mongowire
func (s *Server) helper() { _ = s.rawStore }`, 1},
		"handler bypasses the transaction": {"cmd_x.go", `package mongowire
func (s *Server) cmdX(ctx context.Context) { s.data(ctx).outsideTxn().Find(ns, spec) }`, 1},
		"handler asserts the catalog to the store": {"stage_x.go", `package mongowire
func (s *Server) runX(ctx context.Context) { s.data(ctx).catalog.(*store.Store).Drop(ns) }`, 1},
		"allowed bypass": {"cmd_changestream.go", `package mongowire
func (s *Server) open(ctx context.Context) { _ = s.data(ctx).outsideTxn() }`, 0},
		"owner": {"server.go", `package mongowire
func (s *Server) Close() { s.rawStore.Close() }`, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, tt.name, tt.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			got := doorViolations(f, fset, tt.name, map[string]bool{"rawStore": true})
			if len(got) != tt.want {
				t.Errorf("got %d violations %q, want %d", len(got), got, tt.want)
			}
		})
	}
}

// TestRawStoreFields checks that the check follows the store field of
// Server through a rename.
func TestRawStoreFields(t *testing.T) {
	src := `package mongowire
type Server struct {
	cfg Config
	db  *store.Store
	tx  *store.Txn
}`
	f, err := parser.ParseFile(token.NewFileSet(), "server.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if got := rawStoreFields([]*ast.File{f}); len(got) != 1 || !got["db"] {
		t.Errorf("raw store fields = %v, want db", got)
	}
}
