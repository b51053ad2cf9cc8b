package mql

import "testing"

// Expected answers follow the MongoDB 7.0 manual's $setWindowFields page
// and its window operator pages (the cakeSales examples, scaled down).
func TestSetWindowFields(t *testing.T) {
	t.Parallel()
	input := []string{
		`{"_id": 0, "state": "CA", "q": 120, "t": {"$date": "2020-05-18T14:10:30Z"}}`,
		`{"_id": 1, "state": "WA", "q": 140, "t": {"$date": "2021-03-20T11:30:05Z"}}`,
		`{"_id": 2, "state": "CA", "q": 145, "t": {"$date": "2021-01-11T06:31:15Z"}}`,
		`{"_id": 3, "state": "WA", "q": 134, "t": {"$date": "2020-02-08T13:13:23Z"}}`,
		`{"_id": 4, "state": "CA", "q": 104, "t": {"$date": "2019-01-08T06:12:03Z"}}`,
		`{"_id": 5, "state": "WA", "q": 104, "t": {"$date": "2019-03-01T17:22:11Z"}}`,
	}
	tests := map[string]struct {
		stage string
		want  []string
	}{
		"running sum by partition": {`{"partitionBy": "$state", "sortBy": {"t": 1}, "output": {"s": {"$sum": "$q", "window": {"documents": ["unbounded", "current"]}}}}`,
			[]string{`{"_id": 4, "s": 104}`, `{"_id": 0, "s": 224}`, `{"_id": 2, "s": 369}`, `{"_id": 5, "s": 104}`, `{"_id": 3, "s": 238}`, `{"_id": 1, "s": 378}`}},
		"moving average of three": {`{"partitionBy": "$state", "sortBy": {"t": 1}, "output": {"a": {"$avg": "$q", "window": {"documents": [-1, 1]}}}}`,
			[]string{`{"_id": 4, "a": 112.0}`, `{"_id": 0, "a": 123.0}`, `{"_id": 2, "a": 132.5}`, `{"_id": 5, "a": 119.0}`, `{"_id": 3, "a": 126.0}`, `{"_id": 1, "a": 137.0}`}},
		"whole partition": {`{"partitionBy": "$state", "output": {"m": {"$max": "$q"}, "n": {"$count": {}}}}`,
			[]string{`{"_id": 0, "m": 145, "n": 3}`, `{"_id": 2, "m": 145, "n": 3}`, `{"_id": 4, "m": 145, "n": 3}`, `{"_id": 1, "m": 140, "n": 3}`, `{"_id": 3, "m": 140, "n": 3}`, `{"_id": 5, "m": 140, "n": 3}`}},
		"rank ties": {`{"sortBy": {"q": -1}, "output": {"r": {"$rank": {}}, "d": {"$denseRank": {}}, "n": {"$documentNumber": {}}}}`,
			[]string{`{"_id": 2, "r": 1, "d": 1, "n": 1}`, `{"_id": 1, "r": 2, "d": 2, "n": 2}`, `{"_id": 3, "r": 3, "d": 3, "n": 3}`, `{"_id": 0, "r": 4, "d": 4, "n": 4}`, `{"_id": 4, "r": 5, "d": 5, "n": 5}`, `{"_id": 5, "r": 5, "d": 5, "n": 6}`}},
		"shift with default": {`{"partitionBy": "$state", "sortBy": {"q": 1}, "output": {"next": {"$shift": {"output": "$q", "by": 1, "default": "none"}}}}`,
			[]string{`{"_id": 4, "next": 120}`, `{"_id": 0, "next": 145}`, `{"_id": 2, "next": "none"}`, `{"_id": 5, "next": 134}`, `{"_id": 3, "next": 140}`, `{"_id": 1, "next": "none"}`}},
		"range of values": {`{"sortBy": {"q": 1}, "output": {"near": {"$push": "$_id", "window": {"range": [-10, 10]}}}}`,
			[]string{`{"_id": 4, "near": [4, 5]}`, `{"_id": 5, "near": [4, 5]}`, `{"_id": 0, "near": [0]}`, `{"_id": 3, "near": [3, 1]}`, `{"_id": 1, "near": [3, 1, 2]}`, `{"_id": 2, "near": [1, 2]}`}},
		"range current is the position": {`{"sortBy": {"q": 1}, "output": {"c": {"$push": "$_id", "window": {"range": ["unbounded", "current"]}}}}`,
			[]string{`{"_id": 4, "c": [4]}`, `{"_id": 5, "c": [4, 5]}`, `{"_id": 0, "c": [4, 5, 0]}`, `{"_id": 3, "c": [4, 5, 0, 3]}`, `{"_id": 1, "c": [4, 5, 0, 3, 1]}`, `{"_id": 2, "c": [4, 5, 0, 3, 1, 2]}`}},
		"time range with unit": {`{"partitionBy": "$state", "sortBy": {"t": 1}, "output": {"y": {"$sum": "$q", "window": {"range": [-1, 0], "unit": "year"}}}}`,
			[]string{`{"_id": 4, "y": 104}`, `{"_id": 0, "y": 120}`, `{"_id": 2, "y": 265}`, `{"_id": 5, "y": 104}`, `{"_id": 3, "y": 238}`, `{"_id": 1, "y": 140}`}},
		"empty window": {`{"sortBy": {"q": 1}, "output": {"s": {"$sum": "$q", "window": {"documents": [10, 20]}}, "a": {"$avg": "$q", "window": {"documents": [10, 20]}}, "f": {"$first": "$q", "window": {"documents": [10, 20]}}, "p": {"$addToSet": "$q", "window": {"documents": [10, 20]}}}}`,
			[]string{`{"_id": 4, "s": 0, "a": null, "f": null, "p": []}`, `{"_id": 5, "s": 0, "a": null, "f": null, "p": []}`, `{"_id": 0, "s": 0, "a": null, "f": null, "p": []}`, `{"_id": 3, "s": 0, "a": null, "f": null, "p": []}`, `{"_id": 1, "s": 0, "a": null, "f": null, "p": []}`, `{"_id": 2, "s": 0, "a": null, "f": null, "p": []}`}},
		"dotted output, min and last": {`{"sortBy": {"_id": 1}, "output": {"w.min": {"$min": "$q", "window": {"documents": ["current", "unbounded"]}}, "w.last": {"$last": "$state", "window": {"documents": [-5, 0]}}}}`,
			[]string{`{"_id": 0, "w": {"min": 104, "last": "CA"}}`, `{"_id": 1, "w": {"min": 104, "last": "WA"}}`, `{"_id": 2, "w": {"min": 104, "last": "CA"}}`, `{"_id": 3, "w": {"min": 104, "last": "WA"}}`, `{"_id": 4, "w": {"min": 104, "last": "CA"}}`, `{"_id": 5, "w": {"min": 104, "last": "WA"}}`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Keep only the fields the case checks, so the answers stay short.
			got, err := runPipeline(t, `[{"$setWindowFields": `+tt.stage+`}, {"$project": {"state": 0, "q": 0, "t": 0}}]`, input)
			if err != nil {
				t.Fatal(err)
			}
			wantDocs(t, got, tt.want...)
		})
	}
}

func TestSetWindowFieldsErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		stage string
		code  int32
		msg   string
	}{
		"not an object":       {`1`, 9, "the $setWindowFields stage specification must be an object, found int"},
		"no output":           {`{"sortBy": {"a": 1}}`, 40414, "BSON field '$setWindowFields.output' is missing but a required field"},
		"unknown field":       {`{"output": {}, "x": 1}`, 40415, "BSON field '$setWindowFields.x' is an unknown field."},
		"unknown function":    {`{"output": {"a": {"$nope": 1}}}`, 9, "Unrecognized window function, $nope"},
		"not run here":        {`{"sortBy": {"a": 1}, "output": {"a": {"$derivative": {"input": "$a"}}}}`, 115, "$derivative is not supported by this server"},
		"rank without sort":   {`{"output": {"r": {"$rank": {}}}}`, 5371602, "$rank must be specified with a top level sortBy expression with exactly one element"},
		"rank with two sorts": {`{"sortBy": {"a": 1, "b": 1}, "output": {"r": {"$denseRank": {}}}}`, 5371602, "$denseRank must be specified with a top level sortBy expression with exactly one element"},
		"shift without sort":  {`{"output": {"r": {"$shift": {"output": "$a", "by": 1}}}}`, 5788603, "$shift requires a sortBy"},
		"shift default field": {`{"sortBy": {"a": 1}, "output": {"r": {"$shift": {"output": "$a", "by": 1, "default": "$b"}}}}`, 9, "'$shift:default' expression must yield a constant value."},
		"documents no sort":   {`{"output": {"s": {"$sum": "$a", "window": {"documents": [-1, 0]}}}}`, 5339901, "Document-based bounds require a sortBy"},
		"bounds reversed":     {`{"sortBy": {"a": 1}, "output": {"s": {"$sum": "$a", "window": {"documents": [1, 0]}}}}`, 5339900, "Lower bound must not exceed upper bound: [ 1, 0 ]"},
		"range two sorts":     {`{"sortBy": {"a": 1, "b": 1}, "output": {"s": {"$sum": "$a", "window": {"range": [-1, 0]}}}}`, 5339902, "Range-based bounds require sortBy a single field"},
		"bad bounds":          {`{"sortBy": {"a": 1}, "output": {"s": {"$sum": "$a", "window": {"documents": [1]}}}}`, 9, "Window bounds must be a 2-element array: documents: [ 1 ]"},
		"mergeObjects":        {`{"output": {"s": {"$mergeObjects": "$a"}}}`, 9, "Unrecognized window function, $mergeObjects"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := runPipeline(t, `[{"$setWindowFields": `+tt.stage+`}]`, nil)
			wantCode(t, err, tt.code, tt.msg)
		})
	}
	// A range over a value that is not a number fails when it runs.
	_, err := runPipeline(t, `[{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"s": {"$sum": "$a", "window": {"range": [-1, 0]}}}}}]`, []string{`{"a": 1}`, `{"a": "x"}`})
	wantCode(t, err, 5429414, "Invalid range: Expected the sortBy field to be a number, but it was string")
	_, err = runPipeline(t, `[{"$setWindowFields": {"partitionBy": "$a", "output": {"s": {"$sum": 1}}}}]`, []string{`{"a": [1]}`})
	wantCode(t, err, 5722400, "An expression used to partition cannot evaluate to value of type array")
}

// An output that exists is replaced in place; new ones come last.
func TestSetWindowFieldsReplacesInPlace(t *testing.T) {
	t.Parallel()
	got, err := runPipeline(t, `[{"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"a": {"$documentNumber": {}}, "z": {"$sum": "$a"}}}}]`,
		[]string{`{"_id": 1, "a": 5, "b": 1}`, `{"_id": 2, "b": 2}`})
	if err != nil {
		t.Fatal(err)
	}
	wantDocs(t, got, `{"_id": 1, "a": 1, "b": 1, "z": 5}`, `{"_id": 2, "b": 2, "a": 2, "z": 5}`)
}

// Partitions come out in the order of their keys; 1 and 1.0 are one
// partition, and a missing key is the null partition.
func TestSetWindowFieldsPartitionOrder(t *testing.T) {
	t.Parallel()
	got, err := runPipeline(t, `[{"$setWindowFields": {"partitionBy": "$k", "output": {"n": {"$count": {}}}}}, {"$project": {"k": 0}}]`,
		[]string{`{"_id": 1, "k": "a"}`, `{"_id": 2, "k": 1}`, `{"_id": 3}`, `{"_id": 4, "k": 1.0}`, `{"_id": 5, "k": null}`})
	if err != nil {
		t.Fatal(err)
	}
	wantDocs(t, got, `{"_id": 3, "n": 2}`, `{"_id": 5, "n": 2}`, `{"_id": 2, "n": 2}`, `{"_id": 4, "n": 2}`, `{"_id": 1, "n": 1}`)
}
