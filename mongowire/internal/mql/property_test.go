package mql

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"pgregory.net/rapid"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// genValue generates BSON values of many types, nested up to depth.
func genValue(depth int) *rapid.Generator[bson.RawValue] {
	return rapid.Custom(func(t *rapid.T) bson.RawValue {
		kinds := 12
		if depth <= 0 {
			kinds = 10
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return vInt32(rapid.Int32Range(-3, 3).Draw(t, "i32"))
		case 1:
			return vInt64(rapid.Int64Range(-3, 3).Draw(t, "i64"))
		case 2:
			f := rapid.SampledFrom([]float64{-2.5, -1, 0, math.Copysign(0, -1), 0.5, 1, 2, 3, math.NaN(), math.Inf(1), math.Inf(-1), 1e300}).Draw(t, "f")
			return vDouble(f)
		case 3:
			s := rapid.SampledFrom([]string{"-1.5", "0", "1", "1.0", "2", "NaN", "Infinity", "0.1"}).Draw(t, "dec")
			return vDecimal(mustDecimal(s))
		case 4:
			return vString(rapid.SampledFrom([]string{"", "a", "b", "ab", "B"}).Draw(t, "s"))
		case 5:
			return nullValue
		case 6:
			return vBool(rapid.Bool().Draw(t, "b"))
		case 7:
			return vDate(rapid.Int64Range(-2, 2).Draw(t, "date"))
		case 8:
			return rapid.SampledFrom([]bson.RawValue{{Type: bson.TypeMinKey}, {Type: bson.TypeMaxKey}, {Type: bson.TypeUndefined}}).Draw(t, "special")
		case 9:
			id := bson.ObjectID{}
			id[11] = rapid.ByteRange(0, 2).Draw(t, "oid")
			return bson.RawValue{Type: bson.TypeObjectID, Value: id[:]}
		case 10:
			n := rapid.IntRange(0, 3).Draw(t, "alen")
			vals := make([]bson.RawValue, n)
			for i := range vals {
				vals[i] = genValue(depth-1).Draw(t, "elem")
			}
			return vArray(vals)
		default:
			n := rapid.IntRange(0, 3).Draw(t, "dlen")
			d := newDoc(32)
			for i := 0; i < n; i++ {
				d.add(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key")+strconv.Itoa(i%2), genValue(depth-1).Draw(t, "field"))
			}
			return vDoc(d.done())
		}
	})
}

func sign(i int) int {
	switch {
	case i < 0:
		return -1
	case i > 0:
		return 1
	}
	return 0
}

func TestCompareIsTotalOrder(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := genValue(2)
		a, b, c := g.Draw(t, "a"), g.Draw(t, "b"), g.Draw(t, "c")
		if Compare(a, a) != 0 || !Equal(a, a) {
			t.Fatalf("not reflexive: %s", a)
		}
		if sign(Compare(a, b)) != -sign(Compare(b, a)) {
			t.Fatalf("not antisymmetric: %s vs %s", a, b)
		}
		if Compare(a, b) <= 0 && Compare(b, c) <= 0 && Compare(a, c) > 0 {
			t.Fatalf("not transitive: %s <= %s <= %s but %s > %s", a, b, c, a, c)
		}
		if Equal(a, b) != (Compare(a, b) == 0) {
			t.Fatalf("Equal disagrees with Compare on %s, %s", a, b)
		}
	})
}

// The group/set key must identify exactly the values Compare calls equal.
func TestKeyMatchesEqual(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := genValue(2)
		a, b := g.Draw(t, "a"), g.Draw(t, "b")
		ka, kb := appendKey(nil, a), appendKey(nil, b)
		if Equal(a, b) != bytes.Equal(ka, kb) {
			t.Fatalf("Equal(%s, %s) = %v but keys equal = %v", a, b, Equal(a, b), bytes.Equal(ka, kb))
		}
	})
}

func TestSortIsStableAndOrdered(t *testing.T) {
	t.Parallel()
	s, err := CompileSort(bson.Raw(newDocWith("k", vInt32(1))))
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		in := make([]bson.Raw, n)
		for i := range in {
			d := newDoc(32)
			d.add("k", genValue(1).Draw(t, "k"))
			d.add("i", vInt32(int32(i)))
			in[i] = d.done()
		}
		out := slices.Clone(in)
		s.SortDocs(out)
		for i := 1; i < len(out); i++ {
			c := s.Compare(out[i-1], out[i])
			if c > 0 {
				t.Fatalf("out of order at %d: %s > %s", i, out[i-1], out[i])
			}
			if c == 0 && asInt64(lookup(out[i-1], "i")) > asInt64(lookup(out[i], "i")) {
				t.Fatalf("not stable at %d: %s before %s", i, out[i-1], out[i])
			}
		}
	})
}

// Filter equality must agree with Compare for scalars: {k: v} matches
// {k: w} exactly when v and w are equal (null also matching missing).
func TestEqualityFilterAgreesWithCompare(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		g := genValue(0)
		v, w := g.Draw(t, "v"), g.Draw(t, "w")
		f, err := CompileFilter(newDocWith("k", v))
		if v.Type == bson.TypeUndefined {
			if e, ok := mongoerr.As(err); !ok || e.Message != "cannot compare to undefined" {
				t.Fatalf("{k: undefined} compiled with error %v, want BadValue cannot compare to undefined", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got := f.Match(newDocWith("k", w))
		want := Equal(v, w) && w.Type != bson.TypeUndefined
		if v.Type == bson.TypeNull {
			// MongoDB 7.0: null also matches undefined (8.0 changed that).
			want = w.Type == bson.TypeNull || w.Type == bson.TypeUndefined
		}
		if got != want {
			t.Fatalf("{k: %s} on {k: %s} = %v, want %v", v, w, got, want)
		}
	})
}

func newDocWith(key string, v bson.RawValue) bson.Raw {
	d := newDoc(32)
	d.add(key, v)
	return d.done()
}

func FuzzCompileFilter(f *testing.F) {
	seeds := []string{
		`{"a": 1}`, `{"a": {"$gt": 1, "$lt": [1]}}`, `{"$or": [{"a": null}, {"b.c": {"$in": [1, "x"]}}]}`,
		`{"a": {"$elemMatch": {"b": {"$exists": true}}}}`, `{"a": {"$not": {"$regex": "x", "$options": "i"}}}`,
		`{"$expr": {"$add": ["$a", 1]}}`, `{"a.0.b": {"$size": 2}}`, `{"a": {"$all": [1, 2]}, "b": {"$mod": [2, 0]}}`,
		`{"a": {"$type": ["string", 1]}}`, `{"$nor": [{"a": {"$ne": 1}}]}`,
	}
	for _, s := range seeds {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(d))
	}
	targets := []bson.Raw{}
	for _, s := range []string{`{"a": [1, {"b": 2}, [3]], "b": {"c": "x"}}`, `{"a": 1.5, "b": null}`, `{}`} {
		var d bson.Raw
		_ = bson.UnmarshalExtJSON([]byte(s), false, &d)
		targets = append(targets, d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		flt, err := CompileFilter(bson.Raw(data))
		if err != nil {
			return
		}
		for _, d := range targets {
			flt.Match(d)
			flt.MatchPositional(d)
		}
		flt.EqualityFields()
		flt.Predicates()
		// A compiled filter document also compiles as an update, a
		// projection, a sort and a $match stage without panicking.
		if u, err := CompileUpdate(vDoc(data), nil); err == nil {
			for _, d := range targets {
				_, _ = u.Apply(d, ApplyOptions{PositionalIndex: 0})
			}
		}
		if p, err := CompileProjection(data); err == nil {
			for _, d := range targets {
				_, _ = p.Apply(d, 0)
			}
		}
		if s, err := CompileSort(data); err == nil {
			s.Compare(targets[0], targets[1])
		}
	})
}

// Comparison filters agree with Compare within a type bracket and never
// match across brackets.
func TestRangeFilterAgreesWithCompare(t *testing.T) {
	t.Parallel()
	ops := map[string]func(int) bool{
		"$gt": func(c int) bool { return c > 0 }, "$gte": func(c int) bool { return c >= 0 },
		"$lt": func(c int) bool { return c < 0 }, "$lte": func(c int) bool { return c <= 0 },
	}
	rapid.Check(t, func(t *rapid.T) {
		g := genValue(1)
		bound, v := g.Draw(t, "bound"), g.Draw(t, "v")
		op := rapid.SampledFrom([]string{"$gt", "$gte", "$lt", "$lte"}).Draw(t, "op")
		if v.Type == bson.TypeArray || bound.Type == bson.TypeArray || bound.Type == bson.TypeNull || bound.Type == bson.TypeUndefined ||
			bound.Type == bson.TypeMinKey || bound.Type == bson.TypeMaxKey || isNaN(bound) || isNaN(v) {
			t.Skip("arrays, null, undefined, NaN and Min/MaxKey bounds have their own rules")
		}
		f, err := CompileFilter(newDocWith("k", vDoc(newDocWith(op, bound))))
		if err != nil {
			t.Fatal(err)
		}
		got := f.Match(newDocWith("k", v))
		want := TypeBracket(v.Type) == TypeBracket(bound.Type) && ops[op](Compare(v, bound))
		if got != want {
			t.Fatalf("{k: {%s: %s}} on {k: %s} = %v, want %v", op, bound, v, got, want)
		}
	})
}

func FuzzPipeline(f *testing.F) {
	seeds := []string{
		`{"$group": {"_id": "$a", "n": {"$sum": "$b"}, "s": {"$push": "$$ROOT"}}}`,
		`{"$project": {"x": {"$add": ["$a", 1]}, "y": {"$concat": ["$s", "x"]}, "a.b": 1}}`,
		`{"$addFields": {"m": {"$map": {"input": "$arr", "in": {"$multiply": ["$$this", 2]}}}}}`,
		`{"$unwind": {"path": "$arr", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}}`,
		`{"$lookup": {"from": "o", "let": {"x": "$a"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$a", "$$x"]}}}], "as": "j"}}`,
		`{"$facet": {"a": [{"$sortByCount": "$a"}], "b": [{"$count": "n"}]}}`,
		`{"$sort": {"a": -1, "b.c": 1}}`,
		`{"$replaceWith": {"$mergeObjects": ["$$ROOT", {"z": {"$dateToString": {"date": "$$NOW"}}}]}}`,
		`{"$group": {"_id": null, "t": {"$topN": {"n": 2, "sortBy": {"a": -1}, "output": "$b"}}, "m": {"$minN": {"n": 2, "input": "$a"}}, "s": {"$stdDevSamp": "$b"}}}`,
		`{"$bucket": {"groupBy": "$b", "boundaries": [0, 2, 5], "default": "x", "output": {"l": {"$lastN": {"n": 1, "input": "$a"}}}}}`,
		`{"$bucketAuto": {"groupBy": "$a", "buckets": 2}}`,
		`{"$sample": {"size": 2}}`,
		`{"$project": {"z": {"$zip": {"inputs": ["$arr", [1]], "useLongestLength": true}}, "d": {"$dateTrunc": {"date": "$$NOW", "unit": "week", "binSize": 3}}}}`,
	}
	for _, s := range seeds {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(d))
	}
	var input []bson.Raw
	for _, s := range []string{`{"a": 1, "b": 2, "s": "q", "arr": [1, 2]}`, `{"a": [1, {"b": 2}], "arr": []}`, `{"a": null, "b": {"c": "x"}}`} {
		var d bson.Raw
		_ = bson.UnmarshalExtJSON([]byte(s), false, &d)
		input = append(input, d)
	}
	env := mapEnv{"o": input}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := CompilePipeline([]bson.Raw{data})
		if err != nil {
			return
		}
		out, err := p.Run(env, input)
		if err != nil {
			return
		}
		for _, d := range out {
			if err := d.Validate(); err != nil {
				t.Fatalf("pipeline %s produced invalid BSON: %v", bson.Raw(data), err)
			}
		}
	})
}
