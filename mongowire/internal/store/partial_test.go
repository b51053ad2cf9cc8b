package store

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// TestPartialIndexUse checks which queries a partial index answers: those
// whose predicates imply its filter.
func TestPartialIndexUse(t *testing.T) {
	tests := map[string]struct {
		partial, filter string
		used            bool
	}{
		"equality implied":             {`{"active": true}`, `{"email": "a", "active": true}`, true},
		"equality not implied":         {`{"active": true}`, `{"email": "a"}`, false},
		"other equality":               {`{"active": true}`, `{"email": "a", "active": false}`, false},
		"tighter lower bound":          {`{"n": {"$gt": 5}}`, `{"email": "a", "n": {"$gt": 10}}`, true},
		"same exclusive bound":         {`{"n": {"$gt": 5}}`, `{"email": "a", "n": {"$gt": 5}}`, true},
		"inclusive bound is looser":    {`{"n": {"$gt": 5}}`, `{"email": "a", "n": {"$gte": 5}}`, false},
		"upper bound for lower clause": {`{"n": {"$gt": 5}}`, `{"email": "a", "n": {"$lt": 10}}`, false},
		"equality inside the range":    {`{"n": {"$gte": 5, "$lt": 9}}`, `{"email": "a", "n": 7}`, true},
		"equality outside the range":   {`{"n": {"$gte": 5, "$lt": 9}}`, `{"email": "a", "n": 9}`, false},
		"bound of another type":        {`{"n": {"$gt": 5}}`, `{"email": "a", "n": {"$gt": "z"}}`, false},
		"$in within $in":               {`{"k": {"$in": [1, 2, 3]}}`, `{"email": "a", "k": {"$in": [1, 3]}}`, true},
		"$in beyond $in":               {`{"k": {"$in": [1, 2, 3]}}`, `{"email": "a", "k": {"$in": [1, 4]}}`, false},
		"$exists implied by a value":   {`{"email": {"$exists": true}}`, `{"email": "a"}`, true},
		"$exists and a range":          {`{"n": {"$exists": true}}`, `{"email": "a", "n": {"$lt": 3}}`, true},
		"$and of clauses":              {`{"$and": [{"active": true}, {"n": {"$lte": 3}}]}`, `{"email": "a", "active": true, "n": 2}`, true},
		"$and partly implied":          {`{"$and": [{"active": true}, {"n": {"$lte": 3}}]}`, `{"email": "a", "active": true}`, false},
		"unsupported filter":           {`{"n": {"$type": "int"}}`, `{"email": "a", "n": 1}`, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			spec := IndexSpec{Key: bson.D{{Key: "email", Value: 1}},
				Options: bson.D{{Key: "partialFilterExpression", Value: jsv(t, tc.partial)}}}
			if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{spec}); err != nil {
				t.Fatal(err)
			}
			seed(t, s, `{"_id": 1, "email": "a", "active": true, "n": 7, "k": 1}`, `{"_id": 2, "email": "a", "active": false, "n": 2, "k": 4}`, `{"_id": 3, "email": "a"}`)
			plan, err := s.Explain(nsA, FindSpec{Filter: js(t, tc.filter)})
			if err != nil {
				t.Fatal(err)
			}
			if used := plan.Index != ""; used != tc.used {
				t.Errorf("index used: %v (%+v), want %v", used, plan, tc.used)
			}
		})
	}
}

// TestPartialIndexMatchesScan checks that a query answered through a
// partial index finds what a scan finds.
func TestPartialIndexMatchesScan(t *testing.T) {
	used := 0
	rapid.Check(t, func(t *rapid.T) {
		s, err := Open(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		partial := rapid.SampledFrom([]string{
			`{"b": {"$gt": 0}}`, `{"b": 1}`, `{"b": {"$in": [1, 2]}}`, `{"b": {"$exists": true}}`,
			`{"b": {"$lte": 1}}`, `{"a": {"$gte": 1}}`, `{"$and": [{"b": {"$gte": 1}}, {"b": {"$lt": 2}}]}`,
		}).Draw(t, "partial")
		var pf bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(partial), false, &pf); err != nil {
			t.Fatal(err)
		}
		spec := IndexSpec{Key: bson.D{{Key: "a", Value: 1}}, Options: bson.D{{Key: "partialFilterExpression", Value: pf}}}
		if _, _, _, err := s.CreateIndexes(nsA, []IndexSpec{spec}); err != nil {
			t.Fatal(err)
		}
		values := []any{int32(0), int32(1), int32(2), 1.5, "x", bson.A{int32(1), int32(3)}, nil}
		for i := range rapid.IntRange(0, 20).Draw(t, "docs") {
			d := bson.D{{Key: "_id", Value: i}, {Key: "a", Value: int32(rapid.IntRange(0, 2).Draw(t, "a"))}}
			if b := rapid.IntRange(-1, len(values)-1).Draw(t, "b"); b >= 0 {
				d = append(d, bson.E{Key: "b", Value: values[b]})
			}
			doc, _ := bson.Marshal(d)
			s.Insert(nsA, []bson.Raw{doc}, false)
		}
		op := rapid.SampledFrom([]string{"$eq", "$gt", "$gte", "$lt", "$lte", "$in"}).Draw(t, "op")
		var bv any = values[rapid.IntRange(0, len(values)-2).Draw(t, "value")]
		if op == "$in" {
			bv = bson.A{values[rapid.IntRange(0, 4).Draw(t, "in1")], values[rapid.IntRange(0, 4).Draw(t, "in2")]}
		}
		fraw, _ := bson.Marshal(bson.D{{Key: "a", Value: int32(rapid.IntRange(0, 2).Draw(t, "qa"))}, {Key: "b", Value: bson.D{{Key: op, Value: bv}}}})
		f, err := mql.CompileFilter(fraw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Find(nsA, FindSpec{Filter: fraw})
		if err != nil {
			t.Fatal(err)
		}
		var want []bson.Raw
		docs, _ := s.Find(nsA, FindSpec{})
		for _, d := range docs {
			if f.Match(d) {
				want = append(want, d)
			}
		}
		plan, _ := s.Explain(nsA, FindSpec{Filter: fraw})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("partial %s, filter %v through %+v:\n got %v\nwant %v", partial, bson.Raw(fraw), plan, got, want)
		}
		if plan.Index != "" {
			used++
		}
	})
	if used == 0 {
		t.Error("the partial index answered no query")
	}
}
