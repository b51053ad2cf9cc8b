package changestream

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

var (
	testUUID = bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}
	testNS   = store.Namespace{DB: "d", Coll: "c"}
	testWall = time.Date(2025, 3, 5, 15, 2, 58, 871e6, time.UTC)
)

func keys(t *testing.T, doc bson.Raw) []string {
	t.Helper()
	elems, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = e.Key()
	}
	return out
}

func spec(t *testing.T, db, coll string, opts bson.D) *Spec {
	t.Helper()
	if opts == nil {
		opts = bson.D{}
	}
	s, err := Parse(db, coll, stages(t, cs(opts)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func entry(t *testing.T, op string, ts uint32, mod func(e *store.OplogEntry)) *store.OplogEntry {
	e := &store.OplogEntry{TS: bson.Timestamp{T: 100, I: ts}, Wall: testWall, Op: op, NS: testNS, UUID: testUUID}
	switch op {
	case "insert", "update", "replace", "delete":
		e.DocKey = mustDoc(t, bson.D{{Key: "_id", Value: 1}})
	}
	switch op {
	case "insert", "replace", "update":
		e.Doc = mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: int32(ts)}})
	}
	if op == "update" {
		e.Update = &store.UpdateDescription{UpdatedFields: bson.D{{Key: "x", Value: int32(ts)}}}
	}
	if mod != nil {
		mod(e)
	}
	return e
}

func TestEventShapes(t *testing.T) {
	pre := mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 0}})
	current := mustDoc(t, bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 99}})
	lookup := func(ns store.Namespace, uuid bson.Binary, key bson.Raw) (bson.Raw, error) {
		if ns != testNS || string(uuid.Data) != string(testUUID.Data) {
			t.Errorf("lookup of %v %x", ns, uuid.Data)
		}
		return current, nil
	}
	renamed := func(e *store.OplogEntry) { e.Extra = bson.D{{Key: "to", Value: "d.c2"}} }
	tests := map[string]struct {
		spec     *Spec
		entry    *store.OplogEntry
		wantKeys [][]string // one per event produced
		check    func(t *testing.T, evs []Event)
	}{
		"insert": {spec(t, "d", "c", nil), entry(t, "insert", 1, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey"}},
			func(t *testing.T, evs []Event) {
				d := evs[0].Doc
				if d.Lookup("operationType").StringValue() != "insert" ||
					d.Lookup("ns", "coll").StringValue() != "c" || d.Lookup("documentKey", "_id").Int32() != 1 ||
					d.Lookup("wallTime").Time().UnixMilli() != testWall.UnixMilli() {
					t.Errorf("insert event %s", d)
				}
			}},
		"update": {spec(t, "d", "c", nil), entry(t, "update", 2, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns", "documentKey", "updateDescription"}},
			func(t *testing.T, evs []Event) {
				ud := evs[0].Doc.Lookup("updateDescription").Document()
				if got := keys(t, ud); !slices.Equal(got, []string{"updatedFields", "removedFields", "truncatedArrays"}) {
					t.Errorf("updateDescription keys %v", got)
				}
				if ud.Lookup("updatedFields", "x").Int32() != 2 {
					t.Errorf("updateDescription %s", ud)
				}
			}},
		"update with updateLookup": {spec(t, "d", "c", bson.D{{Key: "fullDocument", Value: "updateLookup"}}), entry(t, "update", 3, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey", "updateDescription"}},
			func(t *testing.T, evs []Event) {
				if got := evs[0].Doc.Lookup("fullDocument", "x").Int32(); got != 99 {
					t.Errorf("fullDocument.x = %d, want the current 99", got)
				}
			}},
		"update whenAvailable without pre-image": {spec(t, "d", "c", bson.D{{Key: "fullDocument", Value: "whenAvailable"}}), entry(t, "update", 4, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey", "updateDescription"}},
			func(t *testing.T, evs []Event) {
				if typ := evs[0].Doc.Lookup("fullDocument").Type; typ != bson.TypeNull {
					t.Errorf("fullDocument is %s, want null", typ)
				}
			}},
		"update required with pre-image": {spec(t, "d", "c", bson.D{{Key: "fullDocument", Value: "required"}, {Key: "fullDocumentBeforeChange", Value: "required"}}),
			entry(t, "update", 5, func(e *store.OplogEntry) { e.Pre = pre }),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey", "updateDescription", "fullDocumentBeforeChange"}},
			func(t *testing.T, evs []Event) {
				d := evs[0].Doc
				if d.Lookup("fullDocument", "x").Int32() != 5 || d.Lookup("fullDocumentBeforeChange", "x").Int32() != 0 {
					t.Errorf("images: %s", d)
				}
			}},
		"replace": {spec(t, "d", "c", nil), entry(t, "replace", 6, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "fullDocument", "ns", "documentKey"}}, nil},
		"delete with pre-image": {spec(t, "d", "c", bson.D{{Key: "fullDocumentBeforeChange", Value: "whenAvailable"}}),
			entry(t, "delete", 7, func(e *store.OplogEntry) { e.Pre = pre }),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns", "documentKey", "fullDocumentBeforeChange"}}, nil},
		"drop invalidates a collection stream": {spec(t, "d", "c", nil), entry(t, "drop", 8, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns"}, {"_id", "operationType", "clusterTime", "wallTime"}},
			func(t *testing.T, evs []Event) {
				if evs[0].Invalidate || !evs[1].Invalidate || !evs[1].Token.FromInvalidate {
					t.Errorf("invalidate flags: %+v", evs)
				}
				if evs[1].Doc.Lookup("operationType").StringValue() != "invalidate" {
					t.Errorf("second event %s", evs[1].Doc)
				}
				a, _ := evs[0].Token.Data()
				b, _ := evs[1].Token.Data()
				if a >= b {
					t.Errorf("invalidate token %s must sort after the drop's %s", b, a)
				}
				if id := evs[0].Token.EventID; !slices.Equal(keys(t, id), []string{"operationType"}) {
					t.Errorf("drop event identifier %s", id)
				}
			}},
		"drop in a database stream": {spec(t, "d", "", nil), entry(t, "drop", 9, nil),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns"}}, nil},
		"rename": {spec(t, "d", "c", nil), entry(t, "rename", 10, renamed),
			[][]string{{"to", "_id", "operationType", "clusterTime", "wallTime", "ns"}, {"_id", "operationType", "clusterTime", "wallTime"}},
			func(t *testing.T, evs []Event) {
				if evs[0].Doc.Lookup("to", "coll").StringValue() != "c2" {
					t.Errorf("rename %s", evs[0].Doc)
				}
				if evs[0].Token.EventID.Lookup("operationDescription", "to", "coll").StringValue() != "c2" {
					t.Errorf("rename event identifier %s", evs[0].Token.EventID)
				}
			}},
		"rename expanded": {spec(t, "d", "", bson.D{{Key: "showExpandedEvents", Value: true}}), entry(t, "rename", 11, renamed),
			[][]string{{"to", "_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}}, nil},
		"dropDatabase in a database stream": {spec(t, "d", "", nil), entry(t, "dropDatabase", 12, func(e *store.OplogEntry) {
			e.NS, e.UUID = store.Namespace{DB: "d"}, bson.Binary{}
		}),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns"}, {"_id", "operationType", "clusterTime", "wallTime"}},
			func(t *testing.T, evs []Event) {
				if got := keys(t, evs[0].Doc.Lookup("ns").Document()); !slices.Equal(got, []string{"db"}) {
					t.Errorf("dropDatabase ns keys %v", got)
				}
				if evs[0].Token.UUID != nil {
					t.Error("a dropDatabase token has no UUID")
				}
			}},
		"dropDatabase in a cluster stream": {spec(t, "admin", "", bson.D{{Key: "allChangesForCluster", Value: true}}),
			entry(t, "dropDatabase", 13, func(e *store.OplogEntry) { e.NS, e.UUID = store.Namespace{DB: "d"}, bson.Binary{} }),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns"}}, nil},
		"dropDatabase in a collection stream": {spec(t, "d", "c", nil),
			entry(t, "dropDatabase", 14, func(e *store.OplogEntry) { e.NS, e.UUID = store.Namespace{DB: "d"}, bson.Binary{} }),
			[][]string{{"_id", "operationType", "clusterTime", "wallTime", "ns"}, {"_id", "operationType", "clusterTime", "wallTime"}},
			func(t *testing.T, evs []Event) {
				if op := evs[0].Doc.Lookup("operationType").StringValue(); op != "dropDatabase" {
					t.Errorf("first event %s, want dropDatabase", op)
				}
			}},
		"insert expanded": {spec(t, "d", "c", bson.D{{Key: "showExpandedEvents", Value: true}}), entry(t, "insert", 15, nil),
			[][]string{{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "fullDocument", "ns", "documentKey"}}, nil},
		"update expanded": {spec(t, "d", "c", bson.D{{Key: "showExpandedEvents", Value: true}}), entry(t, "update", 16, nil),
			[][]string{{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "documentKey", "updateDescription"}},
			func(t *testing.T, evs []Event) {
				ud := evs[0].Doc.Lookup("updateDescription").Document()
				if got := keys(t, ud); !slices.Equal(got, []string{"updatedFields", "removedFields", "truncatedArrays", "disambiguatedPaths"}) {
					t.Errorf("updateDescription keys %v", got)
				}
			}},
		"create expanded": {spec(t, "d", "c", bson.D{{Key: "showExpandedEvents", Value: true}}), entry(t, "create", 17, nil),
			[][]string{{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
			func(t *testing.T, evs []Event) {
				if evs[0].Doc.Lookup("operationDescription", "idIndex", "name").StringValue() != "_id_" {
					t.Errorf("create %s", evs[0].Doc)
				}
			}},
		"createIndexes expanded": {spec(t, "d", "c", bson.D{{Key: "showExpandedEvents", Value: true}}),
			entry(t, "createIndexes", 18, func(e *store.OplogEntry) {
				e.Extra = bson.D{{Key: "indexes", Value: bson.A{bson.D{{Key: "v", Value: 2}, {Key: "key", Value: bson.D{{Key: "x", Value: 1}}}, {Key: "name", Value: "x_1"}}}}}
			}),
			[][]string{{"_id", "operationType", "clusterTime", "collectionUUID", "wallTime", "ns", "operationDescription"}},
			func(t *testing.T, evs []Event) {
				if evs[0].Doc.Lookup("operationDescription", "indexes", "0", "name").StringValue() != "x_1" {
					t.Errorf("createIndexes %s", evs[0].Doc)
				}
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if !tc.spec.relevant(tc.entry) {
				t.Fatal("entry not relevant to the stream")
			}
			evs, err := tc.spec.build(tc.entry, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != len(tc.wantKeys) {
				t.Fatalf("%d events, want %d", len(evs), len(tc.wantKeys))
			}
			for i, ev := range evs {
				if got := keys(t, ev.Doc); !slices.Equal(got, tc.wantKeys[i]) {
					t.Errorf("event %d keys\n got %v\nwant %v", i, got, tc.wantKeys[i])
				}
				tokDoc, _ := ev.Token.Doc()
				if string(ev.Doc.Lookup("_id").Value) != string(tokDoc) {
					t.Errorf("event %d _id %s is not its token %s", i, ev.Doc.Lookup("_id"), tokDoc)
				}
				if ev.Token.ClusterTime != tc.entry.TS {
					t.Errorf("event %d token time %v, want %v", i, ev.Token.ClusterTime, tc.entry.TS)
				}
			}
			if tc.check != nil {
				tc.check(t, evs)
			}
		})
	}
}

func TestEventImagesRequired(t *testing.T) {
	tests := map[string]struct {
		opts  bson.D
		op    string
		wants string
	}{
		"post-image":     {bson.D{{Key: "fullDocument", Value: "required"}}, "update", "require a post-image"},
		"pre-image":      {bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}}, "delete", "require a pre-image"},
		"pre of replace": {bson.D{{Key: "fullDocumentBeforeChange", Value: "required"}}, "replace", "require a pre-image"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := spec(t, "d", "c", tc.opts).build(entry(t, tc.op, 1, nil), nil)
			e, ok := mongoerr.As(err)
			if !ok || e.Code != mongoerr.NoMatchingDocument || !strings.Contains(e.Message, tc.wants) {
				t.Fatalf("got %v, want 47 NoMatchingDocument %q", err, tc.wants)
			}
		})
	}
}

func TestRelevant(t *testing.T) {
	ns := func(db, coll string) func(e *store.OplogEntry) {
		return func(e *store.OplogEntry) { e.NS = store.Namespace{DB: db, Coll: coll} }
	}
	cluster := spec(t, "admin", "", bson.D{{Key: "allChangesForCluster", Value: true}})
	tests := map[string]struct {
		spec  *Spec
		entry *store.OplogEntry
		want  bool
	}{
		"same collection":         {spec(t, "d", "c", nil), entry(t, "insert", 1, nil), true},
		"other collection":        {spec(t, "d", "c", nil), entry(t, "insert", 1, ns("d", "x")), false},
		"other database":          {spec(t, "d", "", nil), entry(t, "insert", 1, ns("e", "c")), false},
		"database stream":         {spec(t, "d", "", nil), entry(t, "insert", 1, ns("d", "x")), true},
		"system collection":       {spec(t, "d", "", nil), entry(t, "insert", 1, ns("d", "system.views")), false},
		"cluster stream":          {cluster, entry(t, "insert", 1, ns("e", "x")), true},
		"cluster skips config":    {cluster, entry(t, "insert", 1, ns("config", "x")), false},
		"cluster skips admin":     {cluster, entry(t, "insert", 1, ns("admin", "x")), false},
		"create hidden":           {spec(t, "d", "c", nil), entry(t, "create", 1, nil), false},
		"dropIndexes hidden":      {spec(t, "d", "c", nil), entry(t, "dropIndexes", 1, nil), false},
		"rename into the watched": {spec(t, "d", "c", nil), entry(t, "rename", 1, func(e *store.OplogEntry) { e.NS.Coll = "old"; e.Extra = bson.D{{Key: "to", Value: "d.c"}} }), true},
		"rename elsewhere":        {spec(t, "d", "c", nil), entry(t, "rename", 1, func(e *store.OplogEntry) { e.NS.Coll = "old"; e.Extra = bson.D{{Key: "to", Value: "d.new"}} }), false},
		"dropDatabase other db":   {spec(t, "d", "c", nil), entry(t, "dropDatabase", 1, ns("e", "")), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.spec.relevant(tc.entry); got != tc.want {
				t.Errorf("relevant = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tok := Token{ClusterTime: bson.Timestamp{T: 1, I: 1}, Version: 2, Type: EventToken, UUID: testUUID.Data,
		EventID: mustDoc(t, bson.D{{Key: "operationType", Value: "update"}, {Key: "documentKey", Value: bson.D{{Key: "_id", Value: 1}}}})}
	tokDoc, _ := tok.Doc()
	big := strings.Repeat("x", 3000)
	doc := mustDoc(t, bson.D{
		{Key: "_id", Value: tokDoc}, {Key: "operationType", Value: "update"},
		{Key: "fullDocument", Value: bson.D{{Key: "s", Value: big}}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "d"}, {Key: "coll", Value: "c"}}},
		{Key: "fullDocumentBeforeChange", Value: bson.D{{Key: "s", Value: big}}},
	})
	const limit = 4000
	frags, err := split(tok, doc, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 2 {
		t.Fatalf("%d fragments, want 2", len(frags))
	}
	var fields []string
	for i, f := range frags {
		if len(f.Doc) > limit {
			t.Errorf("fragment %d is %d bytes, over %d", i, len(f.Doc), limit)
		}
		k := keys(t, f.Doc)
		if k[0] != "_id" || k[1] != "splitEvent" {
			t.Errorf("fragment %d starts %v", i, k[:2])
		}
		if f.Doc.Lookup("splitEvent", "fragment").Int32() != int32(i+1) || f.Doc.Lookup("splitEvent", "of").Int32() != 2 {
			t.Errorf("fragment %d splitEvent %s", i, f.Doc.Lookup("splitEvent"))
		}
		if !f.Token.Split || f.Token.FragmentNum != i {
			t.Errorf("fragment %d token %+v", i, f.Token)
		}
		if i > 0 && Compare(frags[i-1].Token, f.Token) >= 0 {
			t.Errorf("fragment tokens out of order")
		}
		fields = append(fields, k[2:]...)
	}
	// Smallest first: operationType, ns, then the two large images.
	want := []string{"operationType", "ns", "fullDocument", "fullDocumentBeforeChange"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields in fragments %v, want %v", fields, want)
	}
	if Compare(tok, frags[0].Token) >= 0 {
		t.Error("a fragment must sort after the whole event's token")
	}

	if _, err := split(tok, doc, 2000); err == nil {
		t.Error("a field larger than the limit must be refused")
	} else if e, ok := mongoerr.As(err); !ok || e.Code != mongoerr.BSONObjectTooLarge {
		t.Errorf("got %v, want 10334", err)
	}
}
