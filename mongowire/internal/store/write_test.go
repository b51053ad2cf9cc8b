package store

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

func jsv(t testing.TB, s string) bson.RawValue {
	t.Helper()
	d := js(t, `{"v": `+s+`}`)
	return d.Lookup("v")
}

func seed(t *testing.T, s *Store, docs ...string) {
	t.Helper()
	raws := make([]bson.Raw, len(docs))
	for i, d := range docs {
		raws[i] = js(t, d)
	}
	if n, errs := s.Insert(nsA, raws, true); n != len(docs) {
		t.Fatalf("seed: %v", errs)
	}
}

func all(t *testing.T, s *Store) string {
	t.Helper()
	docs := find(t, s, nsA, nil)
	out := ""
	for _, d := range docs {
		out += d.String() + "\n"
	}
	return out
}

func TestUpdate(t *testing.T) {
	tests := map[string]struct {
		spec     func(t *testing.T) UpdateSpec
		matched  int
		modified int
		upserted string // relaxed JSON of the upserted _id, "" for none
		want     []string
	}{
		"set one": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"g": 1}`), Update: jsv(t, `{"$set": {"x": 9}}`)}
		}, 1, 1, "", []string{`{"_id": 1, "g": 1, "x": 9}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`}},
		"set many": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"g": 1}`), Update: jsv(t, `{"$inc": {"x": 10}}`), Multi: true}
		}, 2, 2, "", []string{`{"_id": 1, "g": 1, "x": 11}`, `{"_id": 2, "g": 1, "x": 12}`, `{"_id": 3, "g": 2, "x": 3}`}},
		"no-op counts as matched only": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 1}`), Update: jsv(t, `{"$set": {"x": 1}}`)}
		}, 1, 0, "", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`}},
		"replace keeps _id": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 3}`), Update: jsv(t, `{"y": 1}`)}
		}, 1, 1, "", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "y": 1}`}},
		"no match": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"g": 7}`), Update: jsv(t, `{"$set": {"x": 1}}`)}
		}, 0, 0, "", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`}},
		"upsert seeds from equality fields": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 7, "a.b": 5, "n": {"$gt": 1}}`), Update: jsv(t, `{"$set": {"x": 1}, "$setOnInsert": {"new": true}}`), Upsert: true}
		}, 0, 0, "7", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`, `{"_id": 7, "a": {"b": 5}, "new": true, "x": 1}`}},
		"upsert replacement": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 8}`), Update: jsv(t, `{"r": 1}`), Upsert: true}
		}, 0, 0, "8", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`, `{"_id": 8, "r": 1}`}},
		"upsert matching does not insert": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 2}`), Update: jsv(t, `{"$set": {"x": 5}, "$setOnInsert": {"new": true}}`), Upsert: true}
		}, 1, 1, "", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 5}`, `{"_id": 3, "g": 2, "x": 3}`}},
		"pipeline": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 3}`), Update: jsv(t, `[{"$set": {"y": {"$add": ["$x", 1]}}}, {"$unset": "g"}]`)}
		}, 1, 1, "", []string{`{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "x": 3, "y": 4}`}},
		"push creates the array": {func(t *testing.T) UpdateSpec {
			return UpdateSpec{Filter: js(t, `{"_id": 1}`), Update: jsv(t, `{"$push": {"arr": 4}}`)}
		}, 1, 1, "", []string{`{"_id": 1, "g": 1, "x": 1, "arr": [4]}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			seed(t, s, `{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`)
			res, err := s.Update(nsA, tc.spec(t))
			if err != nil {
				t.Fatal(err)
			}
			if res.Matched != tc.matched || res.Modified != tc.modified {
				t.Errorf("matched %d modified %d, want %d %d", res.Matched, res.Modified, tc.matched, tc.modified)
			}
			switch {
			case tc.upserted == "" && res.UpsertedID.Type != 0:
				t.Errorf("upserted %v, want none", res.UpsertedID)
			case tc.upserted != "" && !res.UpsertedID.Equal(jsv(t, tc.upserted)):
				t.Errorf("upserted %v, want %s", res.UpsertedID, tc.upserted)
			}
			want := ""
			for _, w := range tc.want {
				want += js(t, w).String() + "\n"
			}
			if got := all(t, s); got != want {
				t.Errorf("documents:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	tests := map[string]struct {
		spec UpdateSpec
		code int32
	}{
		"change _id":        {UpdateSpec{Update: bson.RawValue{}}, mongoerr.ImmutableField},
		"replace _id":       {UpdateSpec{}, mongoerr.ImmutableField},
		"inc a string":      {UpdateSpec{}, mongoerr.TypeMismatch},
		"unique violation":  {UpdateSpec{}, mongoerr.DuplicateKey},
		"bad filter":        {UpdateSpec{}, mongoerr.BadValue},
		"multi replacement": {UpdateSpec{Multi: true}, mongoerr.FailedToParse},
	}
	specs := map[string][2]string{
		"change _id":        {`{"_id": 1}`, `{"$set": {"_id": 5}}`},
		"replace _id":       {`{"_id": 1}`, `{"_id": 5, "x": 1}`},
		"inc a string":      {`{"_id": 1}`, `{"$inc": {"s": 1}}`},
		"unique violation":  {`{"_id": 1}`, `{"$set": {"u": 2}}`},
		"bad filter":        {`{"_id": {"$bogus": 1}}`, `{"$set": {"x": 1}}`},
		"multi replacement": {`{}`, `{"y": 1}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			seed(t, s, `{"_id": 1, "s": "str", "u": 1}`, `{"_id": 2, "u": 2}`)
			if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{{Key: bson.D{{Key: "u", Value: 1}}, Unique: true}}); err != nil {
				t.Fatal(err)
			}
			before := all(t, s)
			newest := s.Oplog().Newest()
			spec := tc.spec
			spec.Filter, spec.Update = js(t, specs[name][0]), jsv(t, specs[name][1])
			_, err := s.Update(nsA, spec)
			wantCode(t, err, tc.code)
			if after := all(t, s); after != before {
				t.Errorf("a failed update changed the documents:\n%s\nwas:\n%s", after, before)
			}
			if s.Oplog().Newest() != newest {
				t.Error("a failed update wrote an oplog entry")
			}
		})
	}
}

func TestUpdateOplog(t *testing.T) {
	s := openMem(t)
	pre := bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
	if err := s.Create(nsA, pre); err != nil {
		t.Fatal(err)
	}
	seed(t, s, `{"_id": 1, "a": {"b": 0, "c": 1}, "arr": [1, 2], "x": 1}`, `{"_id": 2, "a": {"b": 0}}`)
	start := s.Oplog().Newest()
	steps := []struct {
		filter, update string
		multi          bool
	}{
		{`{"_id": 1}`, `{"$set": {"a.b": 1}}`, false},
		{`{"_id": 1}`, `{"$unset": {"x": 1}}`, false},
		{`{"_id": 1}`, `{"$push": {"arr": 3}}`, false},
		{`{"_id": 1}`, `{"$pop": {"arr": 1}}`, false},
		{`{"_id": 1}`, `{"$set": {"a.b": 1}}`, false}, // no-op: no entry
		{`{"_id": 1}`, `{"_id": 1, "r": true}`, false},
		{`{}`, `{"$set": {"m": 1}}`, true},
	}
	for _, st := range steps {
		if _, err := s.Update(nsA, UpdateSpec{Filter: js(t, st.filter), Update: jsv(t, st.update), Multi: st.multi}); err != nil {
			t.Fatal(err)
		}
	}
	es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
	want := []struct {
		op, key, desc string
	}{
		{"update", `{"_id": 1}`, `{"updatedFields": {"a.b": 1}, "removedFields": [], "truncatedArrays": []}`},
		{"update", `{"_id": 1}`, `{"updatedFields": {}, "removedFields": ["x"], "truncatedArrays": []}`},
		{"update", `{"_id": 1}`, `{"updatedFields": {"arr.2": 3}, "removedFields": [], "truncatedArrays": []}`},
		{"update", `{"_id": 1}`, `{"updatedFields": {"arr": [1, 2]}, "removedFields": [], "truncatedArrays": []}`}, // as MongoDB logs $pop
		{"replace", `{"_id": 1}`, ""},
		{"update", `{"_id": 1}`, `{"updatedFields": {"m": 1}, "removedFields": [], "truncatedArrays": []}`},
		{"update", `{"_id": 2}`, `{"updatedFields": {"m": 1}, "removedFields": [], "truncatedArrays": []}`},
	}
	if len(es) != len(want) {
		for _, e := range es {
			t.Logf("%s %s %+v", e.Op, e.DocKey, e.Update)
		}
		t.Fatalf("got %d entries, want %d", len(es), len(want))
	}
	for i, w := range want {
		e := es[i]
		if e.Op != w.op || e.DocKey.String() != js(t, w.key).String() {
			t.Errorf("entry %d: %s %s, want %s %s", i, e.Op, e.DocKey, w.op, w.key)
		}
		if e.Pre == nil || e.Doc == nil {
			t.Errorf("entry %d: pre %v post %v", i, e.Pre, e.Doc)
		}
		switch {
		case w.desc == "" && e.Update != nil:
			t.Errorf("entry %d: replace with an update description", i)
		case w.desc != "" && (e.Update == nil || describe(t, e.Update) != js(t, w.desc).String()):
			t.Errorf("entry %d: description %+v, want %s", i, e.Update, w.desc)
		}
	}
	if got := es[4].Doc.String(); got != js(t, `{"_id": 1, "r": true}`).String() {
		t.Errorf("replace post-image %s", got)
	}
	if got := es[4].Pre.Lookup("a", "b").Int32(); got != 1 {
		t.Errorf("replace pre-image %s", es[4].Pre)
	}
}

func TestDelete(t *testing.T) {
	tests := map[string]struct {
		filter string
		limit  int
		n      int
		left   []int32
	}{
		"one":         {`{"g": 1}`, 1, 1, []int32{2, 3, 4}},
		"all matches": {`{"g": 1}`, 0, 2, []int32{3, 4}},
		"everything":  {`{}`, 0, 4, nil},
		"none":        {`{"g": 9}`, 0, 0, []int32{1, 2, 3, 4}},
		"by _id":      {`{"_id": {"$in": [2, 4]}}`, 0, 2, []int32{1, 3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			seed(t, s, `{"_id": 1, "g": 1}`, `{"_id": 2, "g": 1}`, `{"_id": 3, "g": 2}`, `{"_id": 4}`)
			start := s.Oplog().Newest()
			n, err := s.Delete(nsA, js(t, tc.filter), tc.limit)
			if err != nil || n != tc.n {
				t.Fatalf("n=%d err=%v, want %d", n, err, tc.n)
			}
			var left []int32
			for _, d := range find(t, s, nsA, nil) {
				left = append(left, d.Lookup("_id").Int32())
			}
			if fmt.Sprint(left) != fmt.Sprint(tc.left) {
				t.Errorf("left %v, want %v", left, tc.left)
			}
			es, _, _ := s.Oplog().ReadAfter(start, 0, 0)
			if len(es) != tc.n {
				t.Fatalf("%d oplog entries for %d deletes", len(es), tc.n)
			}
			for _, e := range es {
				if e.Op != "delete" || e.DocKey.Lookup("_id").Type != bson.TypeInt32 || e.Pre != nil || e.Doc != nil {
					t.Errorf("delete entry %+v", e)
				}
			}
		})
	}
	s := openMem(t)
	_, err := s.Delete(nsA, js(t, `{"$nope": 1}`), 0)
	wantCode(t, err, mongoerr.BadValue)
}

func TestFindAndModify(t *testing.T) {
	tests := map[string]struct {
		spec    func(t *testing.T) FindAndModifySpec
		value   string // "" = null
		n       int
		updated bool
		upsert  string
	}{
		"update returns the old document": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"g": 1}`), Sort: js(t, `{"x": -1}`), Update: jsv(t, `{"$inc": {"x": 1}}`)}
		}, `{"_id": 2, "g": 1, "x": 2}`, 1, true, ""},
		"new returns the new document": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"g": 1}`), Sort: js(t, `{"x": 1}`), Update: jsv(t, `{"$inc": {"x": 1}}`), New: true}
		}, `{"_id": 1, "g": 1, "x": 2}`, 1, true, ""},
		"fields project the value": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"_id": 3}`), Fields: js(t, `{"x": 1, "_id": 0}`), Update: jsv(t, `{"$set": {"y": 1}}`), New: true}
		}, `{"x": 3}`, 1, true, ""},
		"remove": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"_id": 3}`), Remove: true}
		}, `{"_id": 3, "g": 2, "x": 3}`, 1, false, ""},
		"no match": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"_id": 9}`), Update: jsv(t, `{"$set": {"y": 1}}`)}
		}, "", 0, false, ""},
		"upsert new": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"_id": 9}`), Update: jsv(t, `{"$set": {"y": 1}}`), Upsert: true, New: true}
		}, `{"_id": 9, "y": 1}`, 1, false, "9"},
		"upsert old is null": {func(t *testing.T) FindAndModifySpec {
			return FindAndModifySpec{Filter: js(t, `{"_id": 9}`), Update: jsv(t, `{"$set": {"y": 1}}`), Upsert: true}
		}, "", 1, false, "9"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			seed(t, s, `{"_id": 1, "g": 1, "x": 1}`, `{"_id": 2, "g": 1, "x": 2}`, `{"_id": 3, "g": 2, "x": 3}`)
			res, err := s.FindAndModify(nsA, tc.spec(t))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.value == "" && res.Value != nil:
				t.Errorf("value %s, want null", res.Value)
			case tc.value != "" && res.Value.String() != js(t, tc.value).String():
				t.Errorf("value %s, want %s", res.Value, tc.value)
			}
			if res.N != tc.n || res.UpdatedExisting != tc.updated {
				t.Errorf("n=%d updatedExisting=%v, want %d %v", res.N, res.UpdatedExisting, tc.n, tc.updated)
			}
			if tc.upsert != "" && !res.Upserted.Equal(jsv(t, tc.upsert)) || tc.upsert == "" && res.Upserted.Type != 0 {
				t.Errorf("upserted %v, want %q", res.Upserted, tc.upsert)
			}
		})
	}
	bad := map[string]FindAndModifySpec{
		"update and remove": {Remove: true, Update: jsv(t, `{"$set": {"a": 1}}`)},
		"upsert and remove": {Remove: true, Upsert: true},
		"neither":           {},
	}
	for name, spec := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := openMem(t).FindAndModify(nsA, spec)
			wantCode(t, err, mongoerr.FailedToParse)
		})
	}
}

func TestReads(t *testing.T) {
	s := openMem(t)
	seed(t, s, `{"_id": 1, "g": "a", "x": 3, "tags": ["p", "q"]}`, `{"_id": 2, "g": "b", "x": 1, "tags": ["q"]}`, `{"_id": 3, "g": "a", "x": 2, "tags": null}`, `{"_id": 4, "x": 4}`)
	mustInsert(t, s, Namespace{"db", "other"}, bson.D{{Key: "_id", Value: "a"}, {Key: "name", Value: "A"}})
	docs, err := s.Find(nsA, FindSpec{Filter: js(t, `{"x": {"$gte": 2}}`), Sort: js(t, `{"x": -1}`), Skip: 1, Limit: 2, Projection: js(t, `{"x": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(docs); got != fmt.Sprint([]bson.Raw{js(t, `{"_id": 1, "x": 3}`), js(t, `{"_id": 3, "x": 2}`)}) {
		t.Errorf("find: %v", got)
	}
	if docs, _ := s.Find(nsA, FindSpec{Limit: -2}); len(docs) != 2 {
		t.Errorf("negative limit: %d docs", len(docs))
	}
	if docs, _ := s.Find(Namespace{"db", "missing"}, FindSpec{}); len(docs) != 0 {
		t.Errorf("missing collection: %d docs", len(docs))
	}
	if _, err := s.Find(nsA, FindSpec{Sort: js(t, `{"x": "up"}`)}); err == nil {
		t.Error("bad sort accepted")
	}
	counts := map[string]struct {
		filter      string
		skip, limit int64
		want        int64
	}{
		"all":      {`{}`, 0, 0, 4},
		"filtered": {`{"g": "a"}`, 0, 0, 2},
		"skip":     {`{}`, 3, 0, 1},
		"limit":    {`{}`, 1, 2, 2},
		"past end": {`{}`, 10, 0, 0},
	}
	for name, c := range counts {
		if n, err := s.Count(nsA, js(t, c.filter), c.skip, c.limit); err != nil || n != c.want {
			t.Errorf("count %s: %d %v, want %d", name, n, err, c.want)
		}
	}
	vals, err := s.Distinct(nsA, "tags", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(vals); got != `[null "p" "q"]` {
		t.Errorf("distinct tags: %s", got)
	}
	if vals, _ := s.Distinct(nsA, "g", js(t, `{"x": {"$lt": 3}}`)); fmt.Sprint(vals) != `["a" "b"]` {
		t.Errorf("distinct g: %v", vals)
	}
	out, err := s.Aggregate(nsA, []bson.Raw{
		js(t, `{"$match": {"g": {"$exists": true}}}`),
		js(t, `{"$group": {"_id": "$g", "n": {"$sum": 1}}}`),
		js(t, `{"$sort": {"_id": 1}}`),
		js(t, `{"$lookup": {"from": "other", "localField": "_id", "foreignField": "_id", "as": "o"}}`),
	}, mql.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []bson.Raw{js(t, `{"_id": "a", "n": 2, "o": [{"_id": "a", "name": "A"}]}`), js(t, `{"_id": "b", "n": 1, "o": []}`)}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Errorf("aggregate: %v", out)
	}
	_, err = s.Aggregate(nsA, []bson.Raw{js(t, `{"$bogus": {}}`)}, mql.Limits{})
	wantCode(t, err, mongoerr.Location40324)
}

func TestFindSortLimit(t *testing.T) {
	s := openMem(t)
	docs := make([]bson.Raw, 300)
	for i := range docs {
		docs[i] = raw(t, bson.D{{Key: "_id", Value: i}, {Key: "g", Value: (i * 7) % 10}})
	}
	if n, errs := s.Insert(nsA, docs, true); n != len(docs) {
		t.Fatal(errs)
	}
	full, err := s.Find(nsA, FindSpec{Sort: js(t, `{"g": -1}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range [][2]int64{{0, 1}, {0, 35}, {29, 2}, {5, 100}, {290, 20}} {
		got, err := s.Find(nsA, FindSpec{Sort: js(t, `{"g": -1}`), Skip: w[0], Limit: w[1]})
		if err != nil {
			t.Fatal(err)
		}
		if want := window(full, w[0], w[1]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("skip %d limit %d: got %v\nwant %v", w[0], w[1], got, want)
		}
	}
}
