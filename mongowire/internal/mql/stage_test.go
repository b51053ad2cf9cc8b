package mql

import (
	"testing"
)

// $bucket answers follow the MongoDB 7.0 manual's $bucket page and
// mongod's document_source_bucket.cpp ($bucket is $group on a $switch
// over the boundaries, then $sort on _id).
func TestBucketStage(t *testing.T) {
	t.Parallel()
	input := []string{
		`{"_id": 1, "price": 5, "name": "a"}`,
		`{"_id": 2, "price": 15.5, "name": "b"}`,
		`{"_id": 3, "price": 120, "name": "c"}`,
		`{"_id": 4, "price": 10, "name": "d"}`,
		`{"_id": 5, "name": "e"}`,
		`{"_id": 6, "price": "cheap", "name": "f"}`,
	}
	tests := map[string]struct {
		pipeline string
		want     []string
	}{
		"count by default": {`[{"$bucket": {"groupBy": "$price", "boundaries": [0, 10, 100], "default": "other"}}]`,
			[]string{`{"_id": 0, "count": 1}`, `{"_id": 10, "count": 2}`, `{"_id": "other", "count": 3}`}},
		"output": {`[{"$bucket": {"groupBy": "$price", "boundaries": [0, 10, 200], "default": -1, "output": {"names": {"$push": "$name"}, "total": {"$sum": "$price"}}}}]`,
			[]string{`{"_id": -1, "names": ["e", "f"], "total": 0}`, `{"_id": 0, "names": ["a"], "total": 5}`, `{"_id": 10, "names": ["b", "c", "d"], "total": 145.5}`}},
		"expression groupBy": {`[{"$match": {"price": {"$type": "number"}}}, {"$bucket": {"groupBy": {"$multiply": ["$price", 2]}, "boundaries": [0, 20, 1000]}}]`,
			[]string{`{"_id": 0, "count": 1}`, `{"_id": 20, "count": 3}`}},
		"empty buckets left out": {`[{"$match": {"_id": 1}}, {"$bucket": {"groupBy": "$price", "boundaries": [0, 1, 2, 10]}}]`,
			[]string{`{"_id": 2, "count": 1}`}},
		"string boundaries": {`[{"$bucket": {"groupBy": "$name", "boundaries": ["a", "c", "z"]}}]`,
			[]string{`{"_id": "a", "count": 2}`, `{"_id": "c", "count": 4}`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := runPipeline(t, tt.pipeline, input)
			if err != nil {
				t.Fatal(err)
			}
			wantDocs(t, got, tt.want...)
		})
	}
	_, err := runPipeline(t, `[{"$bucket": {"groupBy": "$price", "boundaries": [0, 10]}}]`, input)
	wantCode(t, err, 40066, "$switch could not find a matching branch for an input, and no default was specified.")
}

func TestBucketErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		stage string
		code  int32
		msg   string
	}{
		"not object":                   {`{"$bucket": 1}`, 40201, "Argument to $bucket stage must be an object, but found type: int."},
		"unknown option":               {`{"$bucket": {"groupBy": "$a", "boundaries": [0, 1], "x": 1}}`, 40197, "Unrecognized option to $bucket: x."},
		"no groupBy":                   {`{"$bucket": {"boundaries": [0, 1]}}`, 40198, "$bucket requires 'groupBy' and 'boundaries' to be specified."},
		"no boundaries":                {`{"$bucket": {"groupBy": "$a"}}`, 40198, "$bucket requires 'groupBy' and 'boundaries' to be specified."},
		"groupBy literal":              {`{"$bucket": {"groupBy": "a", "boundaries": [0, 1]}}`, 40202, `The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression, but found: "a".`},
		"boundaries type":              {`{"$bucket": {"groupBy": "$a", "boundaries": 1}}`, 40200, "The $bucket 'boundaries' field must be an array, but found type: int."},
		"one boundary":                 {`{"$bucket": {"groupBy": "$a", "boundaries": [0]}}`, 40192, "The $bucket 'boundaries' field must have at least 2 values, but found 1 value(s)."},
		"mixed types":                  {`{"$bucket": {"groupBy": "$a", "boundaries": [0, "a"]}}`, 40193, "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types int and string."},
		"unsorted":                     {`{"$bucket": {"groupBy": "$a", "boundaries": [5, 3]}}`, 40194, "The 'boundaries' option to $bucket must be sorted, but elements 0 and 1 are not in ascending order (5 is not less than 3)."},
		"expr boundary":                {`{"$bucket": {"groupBy": "$a", "boundaries": [0, "$b"]}}`, 40191, `The $bucket 'boundaries' field must be an array of constant values, but found value: "$b".`},
		"default inside":               {`{"$bucket": {"groupBy": "$a", "boundaries": [0, 10], "default": 5}}`, 40199, "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary."},
		"output type":                  {`{"$bucket": {"groupBy": "$a", "boundaries": [0, 10], "output": 1}}`, 40196, "The $bucket 'output' field must be an object, but found type: int."},
		"output not acc":               {`{"$bucket": {"groupBy": "$a", "boundaries": [0, 10], "output": {"x": 1}}}`, 40234, "The field 'x' must be an accumulator object"},
		"sample not obj":               {`{"$sample": 3}`, 28745, "the $sample stage specification must be an object"},
		"sample no size":               {`{"$sample": {}}`, 28749, "$sample stage must specify a size"},
		"sample bad size":              {`{"$sample": {"size": "3"}}`, 28746, "size argument to $sample must be a number"},
		"sample negative":              {`{"$sample": {"size": -1}}`, 28747, "size argument to $sample must not be negative"},
		"sample unknown":               {`{"$sample": {"size": 1, "seed": 3}}`, 28748, "unrecognized option to $sample: seed"},
		"auto not object":              {`{"$bucketAuto": []}`, 40240, "The argument to $bucketAuto must be an object, but found type: array"},
		"auto groupBy":                 {`{"$bucketAuto": {"groupBy": 1, "buckets": 2}}`, 40239, "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object, but found: 1"},
		"auto buckets":                 {`{"$bucketAuto": {"groupBy": "$a", "buckets": "2"}}`, 40241, "The $bucketAuto 'buckets' field must be a numeric value, but found type: string"},
		"auto buckets 1.5":             {`{"$bucketAuto": {"groupBy": "$a", "buckets": 1.5}}`, 40242, "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but found 1.5"},
		"auto buckets 0":               {`{"$bucketAuto": {"groupBy": "$a", "buckets": 0}}`, 40243, "The $bucketAuto 'buckets' field must be greater than 0, but found: 0"},
		"auto output":                  {`{"$bucketAuto": {"groupBy": "$a", "buckets": 2, "output": []}}`, 40244, "The $bucketAuto 'output' field must be an object, but found type: array"},
		"auto unknown":                 {`{"$bucketAuto": {"a": 1}}`, 40245, "Unrecognized option to $bucketAuto: a"},
		"auto missing":                 {`{"$bucketAuto": {"groupBy": "$a"}}`, 40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified"},
		"auto granularity":             {`{"$bucketAuto": {"groupBy": "$a", "buckets": 2, "granularity": 1}}`, 40261, "The $bucketAuto 'granularity' field must be a string, but found type: int"},
		"auto granularity unsupported": {`{"$bucketAuto": {"groupBy": "$a", "buckets": 2, "granularity": "R5"}}`, 115, "$bucketAuto with a granularity is not supported by this server"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompilePipeline(stages(t, "["+tt.stage+"]"))
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestSampleStage(t *testing.T) {
	t.Parallel()
	var input []string
	for i := range 20 {
		input = append(input, `{"_id": `+itoa(i)+`}`)
	}
	seen := map[int32]bool{}
	// Every document turns up in some sample: the choice is random, not
	// a prefix.
	for range 200 {
		got, err := runPipeline(t, `[{"$sample": {"size": 3}}]`, input)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("got %d documents, want 3", len(got))
		}
		ids := map[int32]bool{}
		for _, g := range got {
			id := doc(t, g).Lookup("_id").Int32()
			if ids[id] {
				t.Fatalf("document %d sampled twice in %v", id, got)
			}
			ids[id], seen[id] = true, true
		}
	}
	if len(seen) != 20 {
		t.Fatalf("200 samples of 3 saw only %d of 20 documents", len(seen))
	}
	got, err := runPipeline(t, `[{"$sample": {"size": 50}}]`, input[:4])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("size larger than the input: got %d documents, want 4", len(got))
	}
	got, err = runPipeline(t, `[{"$sample": {"size": 0}}]`, input)
	if err != nil || len(got) != 0 {
		t.Fatalf("size 0: got %v, %v", got, err)
	}
}

// $bucketAuto follows DocumentSourceBucketAuto::populateBuckets: buckets
// of round(n/buckets) documents in groupBy order, equal values kept
// together, each bucket's max the next one's min, the last one's max its
// largest value.
func TestBucketAutoStage(t *testing.T) {
	t.Parallel()
	nums := func(vals ...string) []string {
		var out []string
		for i, v := range vals {
			out = append(out, `{"_id": `+itoa(i)+`, "v": `+v+`}`)
		}
		return out
	}
	tests := map[string]struct {
		pipeline string
		input    []string
		want     []string
	}{
		"even": {`[{"$bucketAuto": {"groupBy": "$v", "buckets": 3}}]`, nums("10", "2", "9", "1", "8", "3", "7", "4", "6", "5"),
			[]string{`{"_id": {"min": 1, "max": 4}, "count": 3}`, `{"_id": {"min": 4, "max": 7}, "count": 3}`, `{"_id": {"min": 7, "max": 10}, "count": 4}`}},
		"equal values together": {`[{"$bucketAuto": {"groupBy": "$v", "buckets": 2}}]`, nums("1", "3", "1", "2", "1"),
			[]string{`{"_id": {"min": 1, "max": 2}, "count": 3}`, `{"_id": {"min": 2, "max": 3}, "count": 2}`}},
		"more buckets than documents": {`[{"$bucketAuto": {"groupBy": "$v", "buckets": 5}}]`, nums("3", "1", "2"),
			[]string{`{"_id": {"min": 1, "max": 2}, "count": 1}`, `{"_id": {"min": 2, "max": 3}, "count": 1}`, `{"_id": {"min": 3, "max": 3}, "count": 1}`}},
		"missing is null": {`[{"$bucketAuto": {"groupBy": "$w", "buckets": 2}}]`, nums("1", "2"),
			[]string{`{"_id": {"min": null, "max": null}, "count": 2}`}},
		"output": {`[{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "output": {"ids": {"$push": "$_id"}, "top": {"$max": "$v"}}}}]`, nums("4", "1", "3", "2"),
			[]string{`{"_id": {"min": 1, "max": 3}, "ids": [1, 3], "top": 2}`, `{"_id": {"min": 3, "max": 4}, "ids": [2, 0], "top": 4}`}},
		"one bucket": {`[{"$bucketAuto": {"groupBy": {"$multiply": ["$v", 2]}, "buckets": 1}}]`, nums("4", "1"),
			[]string{`{"_id": {"min": 2, "max": 8}, "count": 2}`}},
		"empty input": {`[{"$bucketAuto": {"groupBy": "$v", "buckets": 2}}]`, nil, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := runPipeline(t, tt.pipeline, tt.input)
			if err != nil {
				t.Fatal(err)
			}
			wantDocs(t, got, tt.want...)
		})
	}
}
