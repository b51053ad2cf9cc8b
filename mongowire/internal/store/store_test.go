package store

import (
	"log/slog"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestMain(m *testing.M) {
	if crashChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// tb is what the test helpers need, so that rapid's *T can use them too.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func openMem(t testing.TB) *Store {
	t.Helper()
	s, err := Open(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func raw(t tb, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rv(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return bson.RawValue{Type: typ, Value: data}
}

// wantCode fails unless err is a *mongoerr.Error with code.
func wantCode(t testing.TB, err error, code int32) *mongoerr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %d", code)
	}
	me, ok := mongoerr.As(err)
	if !ok {
		t.Fatalf("got %T %v, want a *mongoerr.Error with code %d", err, err, code)
	}
	if me.Code != code {
		t.Fatalf("got code %d (%v), want %d", me.Code, me, code)
	}
	return me
}

func mustInsert(t testing.TB, s *Store, ns Namespace, docs ...any) {
	t.Helper()
	raws := make([]bson.Raw, len(docs))
	for i, d := range docs {
		raws[i] = raw(t, d)
	}
	n, errs := s.Insert(ns, raws, true)
	if len(errs) > 0 || n != len(docs) {
		t.Fatalf("insert: n=%d errs=%v", n, errs)
	}
}

func find(t tb, s *Store, ns Namespace, filter any) []bson.Raw {
	t.Helper()
	var f bson.Raw
	if filter != nil {
		f = raw(t, filter)
	}
	docs, err := s.Find(ns, FindSpec{Filter: f})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

var nsA = Namespace{DB: "db", Coll: "a"}

func TestCatalogErrors(t *testing.T) {
	tests := map[string]struct {
		run  func(s *Store) error
		code int32
	}{
		"create existing": {func(s *Store) error { return s.Create(nsA, nil) }, mongoerr.NamespaceExists},
		"create capped without size": {func(s *Store) error {
			return s.Create(Namespace{"db", "c"}, bson.D{{Key: "capped", Value: true}})
		}, mongoerr.InvalidOptions},
		"create view writing": {func(s *Store) error {
			return s.Create(Namespace{"db", "v"}, bson.D{{Key: "viewOn", Value: "a"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$out", Value: "x"}}}}})
		}, codeOptionNotSupportedOnView},
		"create view cycle": {func(s *Store) error {
			return s.Create(Namespace{"db", "v"}, bson.D{{Key: "viewOn", Value: "v"}})
		}, codeGraphContainsCycle},
		"create timeseries without timeField": {func(s *Store) error {
			return s.Create(Namespace{"db", "t"}, bson.D{{Key: "timeseries", Value: bson.D{{Key: "metaField", Value: "m"}}}})
		}, 40414},
		"create bad pre-images option": {func(s *Store) error {
			return s.Create(Namespace{"db", "p"}, bson.D{{Key: "changeStreamPreAndPostImages", Value: true}})
		}, mongoerr.TypeMismatch},
		"create bad db name": {func(s *Store) error { return s.Create(Namespace{"d.b", "c"}, nil) }, mongoerr.InvalidNamespace},
		"create dollar coll": {func(s *Store) error { return s.Create(Namespace{"db", "a$b"}, nil) }, mongoerr.InvalidNamespace},
		"drop missing":       {func(s *Store) error { _, err := s.Drop(Namespace{"db", "nope"}); return err }, mongoerr.NamespaceNotFound},
		"rename missing": {func(s *Store) error {
			return s.Rename(Namespace{"db", "nope"}, Namespace{"db", "x"}, false)
		}, mongoerr.NamespaceNotFound},
		"rename onto existing": {func(s *Store) error { return s.Rename(nsA, Namespace{"db", "b"}, false) }, mongoerr.NamespaceExists},
		"rename to itself":     {func(s *Store) error { return s.Rename(nsA, nsA, false) }, mongoerr.IllegalOperation},
		"collMod missing": {func(s *Store) error {
			return s.CollMod(Namespace{"db", "nope"}, bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}})
		}, mongoerr.NamespaceNotFound},
		"collMod unknown option": {func(s *Store) error { return s.CollMod(nsA, bson.D{{Key: "bogus", Value: 1}}) }, mongoerr.InvalidOptions},
		"listIndexes missing":    {func(s *Store) error { _, err := s.ListIndexes(Namespace{"db", "nope"}); return err }, mongoerr.NamespaceNotFound},
		"dropIndexes missing index": {func(s *Store) error {
			_, err := s.DropIndexes(nsA, []string{"x_1"})
			return err
		}, mongoerr.IndexNotFound},
		"dropIndexes _id_": {func(s *Store) error { _, err := s.DropIndexes(nsA, []string{"_id_"}); return err }, mongoerr.InvalidOptions},
		"createIndexes 2dsphere": {func(s *Store) error {
			_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: "2dsphere"}}}})
			return err
		}, mongoerr.CommandNotSupported},
		"createIndexes same name other key": {func(s *Store) error {
			_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Name: "k", Key: bson.D{{Key: "x", Value: 1}}}})
			if err != nil {
				return err
			}
			_, _, _, err = s.CreateIndexes(nsA, []IndexSpec{{Name: "k", Key: bson.D{{Key: "y", Value: 1}}}})
			return err
		}, mongoerr.IndexKeySpecsConflict},
		"createIndexes same name other options": {func(s *Store) error {
			_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: 1}}}})
			if err != nil {
				return err
			}
			_, _, _, err = s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: 1}}, Unique: true}})
			return err
		}, mongoerr.IndexOptionsConflict},
		"createIndexes same key other name": {func(s *Store) error {
			_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: 1}}}})
			if err != nil {
				return err
			}
			_, _, _, err = s.CreateIndexes(nsA, []IndexSpec{{Name: "other", Key: bson.D{{Key: "x", Value: 1}}}})
			return err
		}, mongoerr.IndexOptionsConflict},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if err := s.Create(nsA, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(Namespace{"db", "b"}, nil); err != nil {
				t.Fatal(err)
			}
			wantCode(t, tc.run(s), tc.code)
		})
	}
}

func TestCatalog(t *testing.T) {
	s := openMem(t)
	pre := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	if err := s.Create(nsA, pre); err != nil {
		t.Fatal(err)
	}
	info, ok := s.Collection(nsA)
	if !ok || !info.PreAndPostImages || info.UUID.Subtype != bson.TypeBinaryUUID || len(info.UUID.Data) != 16 {
		t.Fatalf("collection info %+v ok=%v", info, ok)
	}
	mustInsert(t, s, Namespace{"db", "b"}, bson.D{{Key: "x", Value: 1}}) // implicit create
	mustInsert(t, s, Namespace{"other", "c"}, bson.D{{Key: "x", Value: 1}})
	colls := s.ListCollections("db")
	if len(colls) != 2 || colls[0].Name != "a" || colls[1].Name != "b" {
		t.Fatalf("collections %+v", colls)
	}
	dbs := s.ListDatabases()
	if len(dbs) != 2 || dbs[0].Name != "db" || dbs[1].Name != "other" || dbs[0].SizeOnDisk == 0 || dbs[0].Empty {
		t.Fatalf("databases %+v", dbs)
	}

	if err := s.Rename(Namespace{"db", "b"}, Namespace{"db", "b2"}, false); err != nil {
		t.Fatal(err)
	}
	if got := find(t, s, Namespace{"db", "b2"}, nil); len(got) != 1 {
		t.Fatalf("renamed collection holds %d docs", len(got))
	}
	if _, ok := s.Collection(Namespace{"db", "b"}); ok {
		t.Fatal("old name still exists")
	}
	// dropTarget replaces the target.
	if err := s.Rename(Namespace{"db", "b2"}, nsA, true); err != nil {
		t.Fatal(err)
	}
	if info2, _ := s.Collection(nsA); info2.PreAndPostImages {
		t.Fatal("target's options survived dropTarget")
	}

	if err := s.CollMod(nsA, pre); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Collection(nsA); !info.PreAndPostImages {
		t.Fatal("collMod did not enable pre-images")
	}

	created, before, after, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "x", Value: 1}, {Key: "y", Value: -1}}}, {Key: bson.D{{Key: "z", Value: 1}}, Unique: true}})
	if err != nil || created || before != 1 || after != 3 {
		t.Fatalf("createIndexes: created=%v before=%d after=%d err=%v", created, before, after, err)
	}
	// The same index again is a no-op.
	if _, before, after, err = s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "z", Value: 1}}, Unique: true}}); err != nil || before != 3 || after != 3 {
		t.Fatalf("repeat createIndexes: before=%d after=%d err=%v", before, after, err)
	}
	specs, err := s.ListIndexes(nsA)
	if err != nil || len(specs) != 3 || specs[0].Name != "_id_" || specs[1].Name != "x_1_y_-1" || specs[2].Name != "z_1" || !specs[2].Unique {
		t.Fatalf("indexes %+v err=%v", specs, err)
	}
	created, _, _, err = s.CreateIndexes(Namespace{"db", "fresh"}, []IndexSpec{{Key: bson.D{{Key: "q", Value: 1}}}})
	if err != nil || !created {
		t.Fatalf("createIndexes on a new collection: created=%v err=%v", created, err)
	}
	if n, err := s.DropIndexes(nsA, []string{"*"}); err != nil || n != 3 {
		t.Fatalf("dropIndexes *: n=%d err=%v", n, err)
	}
	if specs, _ := s.ListIndexes(nsA); len(specs) != 1 {
		t.Fatalf("after dropIndexes * %d indexes remain", len(specs))
	}
	if n, err := s.Drop(nsA); err != nil || n != 1 {
		t.Fatalf("drop: n=%d err=%v", n, err)
	}
	if err := s.DropDatabase("db"); err != nil {
		t.Fatal(err)
	}
	if colls := s.ListCollections("db"); len(colls) != 0 {
		t.Fatalf("dropDatabase left %+v", colls)
	}
	if err := s.DropDatabase("nothing"); err != nil {
		t.Fatalf("dropDatabase of a missing database: %v", err)
	}
}

func TestClosed(t *testing.T) {
	s := openDir(t, t.TempDir(), nil)
	mustInsert(t, s, nsA, bson.D{{Key: "x", Value: 1}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, errs := s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "x", Value: 2}})}, true)
	if len(errs) != 1 || errs[0].Err.Code != mongoerr.ShutdownInProgress {
		t.Fatalf("insert after close: %v", errs)
	}
	_, err := s.Find(nsA, FindSpec{})
	wantCode(t, err, mongoerr.ShutdownInProgress)
	wantCode(t, s.Create(Namespace{"db", "x"}, nil), mongoerr.ShutdownInProgress)
}
