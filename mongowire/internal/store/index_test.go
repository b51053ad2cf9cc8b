package store

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestInsertID(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "y", Value: 2}, {Key: "_id", Value: "s"}})
	docs := find(t, s, nsA, nil)
	if len(docs) != 2 {
		t.Fatalf("got %d docs", len(docs))
	}
	first, _ := docs[0].IndexErr(0)
	if first.Key() != "_id" || first.Value().Type != bson.TypeObjectID {
		t.Errorf("generated _id: got first element %v", first)
	}
	first, _ = docs[1].IndexErr(0)
	if first.Key() != "_id" || first.Value().StringValue() != "s" {
		t.Errorf("given _id not moved first: %v", docs[1])
	}
}

func TestInsertErrors(t *testing.T) {
	deep := bson.D{{Key: "x", Value: 1}}
	for range 120 {
		deep = bson.D{{Key: "x", Value: deep}}
	}
	tests := map[string]struct {
		docs    []any
		ordered bool
		n       int
		idx     []int
		code    int32
	}{
		"duplicate ordered stops":        {[]any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}, true, 1, []int{1}, mongoerr.DuplicateKey},
		"duplicate unordered goes on":    {[]any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 2}}}, false, 2, []int{1, 3}, mongoerr.DuplicateKey},
		"too large":                      {[]any{bson.D{{Key: "s", Value: strings.Repeat("x", MaxDocumentSize)}}}, true, 0, []int{0}, mongoerr.BadValue},
		"too deep":                       {[]any{deep}, true, 0, []int{0}, mongoerr.Overflow},
		"array _id":                      {[]any{bson.D{{Key: "_id", Value: bson.A{1}}}}, true, 0, []int{0}, mongoerr.InvalidIdField},
		"bad then good unordered":        {[]any{bson.D{{Key: "_id", Value: bson.A{1}}}, bson.D{{Key: "_id", Value: 1}}}, false, 1, []int{0}, mongoerr.InvalidIdField},
		"duplicate across numeric types": {[]any{bson.D{{Key: "_id", Value: int32(7)}}, bson.D{{Key: "_id", Value: 7.0}}}, true, 1, []int{1}, mongoerr.DuplicateKey},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			raws := make([]bson.Raw, len(tc.docs))
			for i, d := range tc.docs {
				raws[i] = raw(t, d)
			}
			n, errs := s.Insert(nsA, raws, tc.ordered)
			if n != tc.n || len(errs) != len(tc.idx) {
				t.Fatalf("n=%d errs=%v, want n=%d and errors at %v", n, errs, tc.n, tc.idx)
			}
			for i, e := range errs {
				if e.Index != tc.idx[i] || e.Err.Code != tc.code {
					t.Errorf("error %d: index %d code %d (%v), want index %d code %d", i, e.Index, e.Err.Code, e.Err, tc.idx[i], tc.code)
				}
			}
		})
	}
}

func TestDuplicateKeyShape(t *testing.T) {
	s := openMem(t)
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 1}, {Key: "email", Value: "a@x"}})
	_, errs := s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 1}})}, true)
	if len(errs) != 1 {
		t.Fatalf("errs %v", errs)
	}
	e := errs[0].Err
	if want := "E11000 duplicate key error collection: db.a index: _id_ dup key: { _id: 1 }"; e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	info := raw(t, e.Info)
	if got := info.Lookup("keyPattern", "_id").AsInt64(); got != 1 {
		t.Errorf("keyPattern %v", info)
	}
	if got := info.Lookup("keyValue", "_id").AsInt64(); got != 1 {
		t.Errorf("keyValue %v", info)
	}

	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "email", Value: 1}}, Unique: true}}); err != nil {
		t.Fatal(err)
	}
	_, errs = s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 2}, {Key: "email", Value: "a@x"}})}, true)
	if len(errs) != 1 || errs[0].Err.Message != `E11000 duplicate key error collection: db.a index: email_1 dup key: { email: "a@x" }` {
		t.Fatalf("unique secondary: %v", errs)
	}
	// Missing counts as null for uniqueness: only one document may lack it.
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 3}})
	_, errs = s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 4}})}, true)
	if len(errs) != 1 || !strings.Contains(errs[0].Err.Message, "dup key: { email: null }") {
		t.Fatalf("second missing email: %v", errs)
	}
	// A unique index cannot be built over duplicates.
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 5}, {Key: "email", Value: "5"}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: 6}, {Key: "email", Value: "6"}, {Key: "n", Value: 1}})
	_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "n", Value: 1}}, Unique: true}})
	wantCode(t, err, mongoerr.DuplicateKey)
	if specs, _ := s.ListIndexes(nsA); len(specs) != 2 {
		t.Fatalf("failed index build left %d indexes", len(specs))
	}
	// Several indexes are built all or nothing.
	_, _, _, err = s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "m", Value: 1}}}, {Key: bson.D{{Key: "n", Value: 1}}, Unique: true}})
	wantCode(t, err, mongoerr.DuplicateKey)
	if specs, _ := s.ListIndexes(nsA); len(specs) != 2 {
		t.Fatalf("a failed createIndexes left %d indexes", len(specs))
	}
	// Sparse unique: documents without the field do not collide.
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "sp", Value: 1}}, Unique: true, Sparse: true}}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, nsA, bson.D{{Key: "_id", Value: 7}, {Key: "email", Value: "b"}}, bson.D{{Key: "_id", Value: 8}, {Key: "email", Value: "c"}})
}

func TestCompoundAndMultikey(t *testing.T) {
	s := openMem(t)
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{
		{Key: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}, Unique: true},
		{Key: bson.D{{Key: "tags", Value: 1}}},
		{Key: bson.D{{Key: "items.sku", Value: 1}}},
		{Key: bson.D{{Key: "n", Value: 1}}},
	}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, nsA,
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 1}, {Key: "tags", Value: bson.A{"red", "blue"}}, {Key: "n", Value: bson.A{1, 20}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 1}, {Key: "b", Value: 2}, {Key: "tags", Value: bson.A{"green"}}, {Key: "n", Value: 7}, {Key: "items", Value: bson.A{bson.D{{Key: "sku", Value: "k1"}}, bson.D{{Key: "sku", Value: "k2"}}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 2}, {Key: "b", Value: 1}, {Key: "tags", Value: bson.A{}}},
	)
	_, errs := s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 4}, {Key: "a", Value: 1}, {Key: "b", Value: 2}})}, true)
	if len(errs) != 1 || errs[0].Err.Message != "E11000 duplicate key error collection: db.a index: a_1_b_-1 dup key: { a: 1, b: 2 }" {
		t.Fatalf("compound unique: %v", errs)
	}
	_, errs = s.Insert(nsA, []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 5}, {Key: "a", Value: bson.A{1, 2}}, {Key: "b", Value: bson.A{3, 4}}})}, true)
	if len(errs) != 1 || errs[0].Err.Code != mongoerr.CannotIndexParallelArrays {
		t.Fatalf("parallel arrays: %v", errs)
	}
	tests := map[string]struct {
		filter any
		index  string
		ids    []int32
	}{
		"multikey element":     {bson.D{{Key: "tags", Value: "blue"}}, "tags_1", []int32{1}},
		"multikey $in":         {bson.D{{Key: "tags", Value: bson.D{{Key: "$in", Value: bson.A{"green", "red"}}}}}, "tags_1", []int32{1, 2}},
		"array of documents":   {bson.D{{Key: "items.sku", Value: "k2"}}, "items.sku_1", []int32{2}},
		"compound leading":     {bson.D{{Key: "a", Value: 1}}, "a_1_b_-1", []int32{1, 2}},
		"compound both fields": {bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, "a_1_b_-1", []int32{2}},
		"range":                {bson.D{{Key: "a", Value: bson.D{{Key: "$gt", Value: 1}}}}, "a_1_b_-1", []int32{3}},
		"range both bounds":    {bson.D{{Key: "a", Value: bson.D{{Key: "$gte", Value: 1}, {Key: "$lt", Value: 2}}}}, "a_1_b_-1", []int32{1, 2}},
		"_id":                  {bson.D{{Key: "_id", Value: 3}}, "_id_", []int32{3}},
		"_id across types":     {bson.D{{Key: "_id", Value: 3.0}}, "_id_", []int32{3}},
		"unindexed":            {bson.D{{Key: "b", Value: 1}}, "", []int32{1, 3}},
		"null is scanned":      {bson.D{{Key: "items", Value: nil}}, "", []int32{1, 3}},
		"multikey range bounds apply to any element": {bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: 5}, {Key: "$lt", Value: 10}}}}, "n_1", []int32{1, 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := s.Explain(nsA, FindSpec{Filter: raw(t, tc.filter)})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Index != tc.index {
				t.Errorf("index %q, want %q", plan.Index, tc.index)
			}
			docs := find(t, s, nsA, tc.filter)
			var ids []int32
			for _, d := range docs {
				ids = append(ids, d.Lookup("_id").Int32())
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.ids) {
				t.Errorf("ids %v, want %v", ids, tc.ids)
			}
		})
	}
}

// TestIndexExaminesFew shows that an indexed lookup examines only the
// matching documents while a scan examines them all.
func TestIndexExaminesFew(t *testing.T) {
	s := openMem(t)
	docs := make([]bson.Raw, 5000)
	for i := range docs {
		docs[i] = raw(t, bson.D{{Key: "_id", Value: i}, {Key: "k", Value: i % 1000}, {Key: "u", Value: i % 1000}})
	}
	if n, errs := s.Insert(nsA, docs, true); n != len(docs) {
		t.Fatal(errs)
	}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "k", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	indexed, _ := s.Explain(nsA, FindSpec{Filter: raw(t, bson.D{{Key: "k", Value: 7}})})
	scanned, _ := s.Explain(nsA, FindSpec{Filter: raw(t, bson.D{{Key: "u", Value: 7}})})
	if indexed.Index != "k_1" || indexed.DocsExamined != 5 || indexed.KeysExamined > 6 {
		t.Errorf("indexed plan %+v", indexed)
	}
	if scanned.Index != "" || scanned.DocsExamined != 5000 {
		t.Errorf("scan plan %+v", scanned)
	}
	// Deletes and updates keep the index exact.
	if n, err := s.Delete(nsA, raw(t, bson.D{{Key: "k", Value: 7}}), 0); err != nil || n != 5 {
		t.Fatalf("delete n=%d err=%v", n, err)
	}
	if got := find(t, s, nsA, bson.D{{Key: "k", Value: 7}}); len(got) != 0 {
		t.Fatalf("deleted docs still found: %d", len(got))
	}
	if n, err := s.Count(nsA, nil, 0, 0); err != nil || n != 4995 {
		t.Fatalf("count %d err=%v", n, err)
	}
}

func TestUpdateMaintainsIndexes(t *testing.T) {
	s := openMem(t)
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "g", Value: 1}}}, {Key: bson.D{{Key: "u", Value: 1}}, Unique: true}}); err != nil {
		t.Fatal(err)
	}
	seed(t, s, `{"_id": 1, "g": 1, "u": 1, "x": 0}`, `{"_id": 2, "g": 1, "u": 2, "x": 0}`)
	if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"_id": 1}`), Update: jsv(t, `{"$set": {"x": 5}}`)}); err != nil {
		t.Fatal(err)
	}
	if got := find(t, s, nsA, js(t, `{"g": 1, "x": 5}`)); len(got) != 1 || got[0].Lookup("_id").Int32() != 1 {
		t.Fatalf("unchanged keys: found %v", got)
	}
	if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"_id": 1}`), Update: jsv(t, `{"$set": {"g": 2, "u": 3}}`)}); err != nil {
		t.Fatal(err)
	}
	if got := find(t, s, nsA, js(t, `{"g": 1}`)); len(got) != 1 || got[0].Lookup("_id").Int32() != 2 {
		t.Fatalf("old key still finds: %v", got)
	}
	if got := find(t, s, nsA, js(t, `{"g": 2}`)); len(got) != 1 || got[0].Lookup("_id").Int32() != 1 {
		t.Fatalf("new key: %v", got)
	}
	// The old unique value is free again; the new one is taken.
	seed(t, s, `{"_id": 3, "g": 0, "u": 1}`)
	_, err := s.Update(nsA, UpdateSpec{Filter: js(t, `{"_id": 2}`), Update: jsv(t, `{"$set": {"u": 3}}`)})
	wantCode(t, err, mongoerr.DuplicateKey)
	for name, f := range map[string]string{"g": `{"g": {"$gte": 0}}`, "u": `{"u": {"$in": [1, 2, 3]}}`, "_id": `{"_id": {"$gt": 0}}`} {
		plan, _ := s.Explain(nsA, FindSpec{Filter: js(t, f)})
		if got := find(t, s, nsA, js(t, f)); len(got) != 3 || plan.Index == "" {
			t.Errorf("%s: %d docs through %q", name, len(got), plan.Index)
		}
	}
}

func TestPartialIndex(t *testing.T) {
	s := openMem(t)
	spec := IndexSpec{Key: bson.D{{Key: "email", Value: 1}}, Unique: true,
		Options: bson.D{{Key: "partialFilterExpression", Value: jsv(t, `{"active": true}`)}}}
	if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{spec}); err != nil {
		t.Fatal(err)
	}
	// Only active documents must have distinct emails.
	seed(t, s, `{"_id": 1, "email": "a", "active": true}`, `{"_id": 2, "email": "a", "active": false}`, `{"_id": 3, "email": "a"}`)
	_, errs := s.Insert(nsA, []bson.Raw{js(t, `{"_id": 4, "email": "a", "active": true}`)}, true)
	if len(errs) != 1 || errs[0].Err.Code != mongoerr.DuplicateKey {
		t.Fatalf("partial unique: %v", errs)
	}
	// A partial index cannot answer queries outside its filter, so it is not used.
	if plan, _ := s.Explain(nsA, FindSpec{Filter: js(t, `{"email": "a"}`)}); plan.Index != "" {
		t.Errorf("partial index used: %+v", plan)
	}
	// A query within its filter is answered through it.
	plan, _ := s.Explain(nsA, FindSpec{Filter: js(t, `{"email": "a", "active": true}`)})
	if got := find(t, s, nsA, js(t, `{"email": "a", "active": true}`)); plan.Index == "" || len(got) != 1 {
		t.Errorf("query within the partial filter: %d docs through %+v", len(got), plan)
	}
	if got := find(t, s, nsA, js(t, `{"email": "a"}`)); len(got) != 3 {
		t.Errorf("found %d", len(got))
	}
	bad := IndexSpec{Key: bson.D{{Key: "x", Value: 1}}, Options: bson.D{{Key: "partialFilterExpression", Value: jsv(t, `5`)}}}
	_, _, _, err := s.CreateIndexes(nsA, []IndexSpec{bad})
	wantCode(t, err, mongoerr.TypeMismatch)
}
