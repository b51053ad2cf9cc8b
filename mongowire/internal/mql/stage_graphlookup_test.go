package mql

import (
	"fmt"
	"testing"
)

// Expected answers follow the MongoDB 7.0 manual's $graphLookup page (the
// employees reporting hierarchy and the airports examples).
func TestGraphLookup(t *testing.T) {
	t.Parallel()
	env := mapEnv{
		"emp": docs(t,
			`{"_id": 1, "name": "Dev"}`,
			`{"_id": 2, "name": "Eliot", "reportsTo": "Dev"}`,
			`{"_id": 3, "name": "Ron", "reportsTo": "Eliot"}`,
			`{"_id": 4, "name": "Andrew", "reportsTo": "Eliot"}`,
			`{"_id": 5, "name": "Asya", "reportsTo": "Ron"}`,
			`{"_id": 6, "name": "Dan", "reportsTo": "Andrew"}`,
		),
		"air": docs(t,
			`{"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]}`,
			`{"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]}`,
			`{"_id": 2, "airport": "ORD", "connects": ["JFK"]}`,
			`{"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]}`,
			`{"_id": 4, "airport": "LHR", "connects": ["PWM"]}`,
		),
	}
	tests := map[string]struct {
		input    []string
		pipeline string
		want     []string
	}{
		"hierarchy": {[]string{`{"_id": 6, "name": "Dan", "reportsTo": "Andrew"}`},
			`[{"$graphLookup": {"from": "emp", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "depthField": "d"}},
			  {"$project": {"chain": {"$map": {"input": "$chain", "in": {"n": "$$this.name", "d": "$$this.d"}}}}}]`,
			[]string{`{"_id": 6, "chain": [{"n": "Andrew", "d": {"$numberLong": "0"}}, {"n": "Eliot", "d": {"$numberLong": "1"}}, {"n": "Dev", "d": {"$numberLong": "2"}}]}`}},
		"maxDepth": {[]string{`{"_id": 6, "reportsTo": "Andrew"}`},
			`[{"$graphLookup": {"from": "emp", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "maxDepth": 1}},
			  {"$project": {"chain": "$chain.name"}}]`,
			[]string{`{"_id": 6, "chain": ["Andrew", "Eliot"]}`}},
		"cycles found once": {[]string{`{"_id": 9, "from": "JFK"}`},
			`[{"$graphLookup": {"from": "air", "startWith": "$from", "connectFromField": "connects", "connectToField": "airport", "as": "r", "depthField": "hops"}},
			  {"$project": {"r": {"$map": {"input": "$r", "in": ["$$this.airport", "$$this.hops"]}}}}]`,
			[]string{`{"_id": 9, "r": [["JFK", {"$numberLong": "0"}], ["BOS", {"$numberLong": "1"}], ["ORD", {"$numberLong": "1"}], ["PWM", {"$numberLong": "2"}], ["LHR", {"$numberLong": "3"}]]}`}},
		"restrictSearchWithMatch": {[]string{`{"_id": 9, "from": ["JFK"]}`},
			`[{"$graphLookup": {"from": "air", "startWith": "$from", "connectFromField": "connects", "connectToField": "airport", "as": "r", "restrictSearchWithMatch": {"airport": {"$ne": "BOS"}}}},
			  {"$project": {"r": "$r.airport"}}]`,
			[]string{`{"_id": 9, "r": ["JFK", "ORD"]}`}},
		"nothing found": {[]string{`{"_id": 9, "from": "XXX"}`, `{"_id": 10}`},
			`[{"$graphLookup": {"from": "air", "startWith": "$from", "connectFromField": "connects", "connectToField": "airport", "as": "r"}}, {"$project": {"r": 1}}]`,
			[]string{`{"_id": 9, "r": []}`, `{"_id": 10, "r": []}`}},
		"missing collection": {[]string{`{"_id": 1, "a": 1}`},
			`[{"$graphLookup": {"from": "none", "startWith": "$a", "connectFromField": "a", "connectToField": "a", "as": "r"}}]`,
			[]string{`{"_id": 1, "a": 1, "r": []}`}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := CompilePipeline(stages(t, tt.pipeline))
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(env, docs(t, tt.input...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range out {
				got = append(got, d.String())
			}
			wantDocs(t, got, tt.want...)
		})
	}
}

func TestGraphLookupErrors(t *testing.T) {
	t.Parallel()
	base := `"from": "c", "startWith": "$a", "connectFromField": "a", "connectToField": "b", "as": "g"`
	tests := map[string]struct {
		stage string
		code  int32
		msg   string
	}{
		"not object":       {`1`, 9, "the $graphLookup stage specification must be an object, but found int"},
		"missing as":       {`{"from": "c", "startWith": "$a", "connectFromField": "a", "connectToField": "b"}`, 40105, "$graphLookup requires 'startWith', 'connectFromField', 'connectToField', and 'as' to be specified."},
		"missing from":     {`{"startWith": "$a", "connectFromField": "a", "connectToField": "b", "as": "g"}`, 9, "must specify 'from' field for a $graphLookup"},
		"unknown":          {`{` + base + `, "x": 1}`, 40104, "Unknown argument to $graphLookup: x"},
		"as not string":    {`{"from": "c", "startWith": "$a", "connectFromField": "a", "connectToField": "b", "as": 1}`, 40103, "expected string as argument for as, found: 1"},
		"maxDepth type":    {`{` + base + `, "maxDepth": "x"}`, 40100, "maxDepth must be numeric, found type: string"},
		"maxDepth neg":     {`{` + base + `, "maxDepth": -1}`, 40101, "maxDepth requires a nonnegative argument, found: -1"},
		"maxDepth frac":    {`{` + base + `, "maxDepth": 1.5}`, 40102, "maxDepth could not be represented as a long long: 1.5"},
		"restrict type":    {`{` + base + `, "restrictSearchWithMatch": 1}`, 40185, "restrictSearchWithMatch must be an object, found int"},
		"dollar field":     {`{"from": "c", "startWith": "$a", "connectFromField": "$a", "connectToField": "b", "as": "g"}`, 16410, ""},
		"bad restrict":     {`{` + base + `, "restrictSearchWithMatch": {"a": {"$bad": 1}}}`, 2, ""},
		"bad startWith op": {`{"from": "c", "startWith": {"$nope": 1}, "connectFromField": "a", "connectToField": "b", "as": "g"}`, 168, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := runPipeline(t, `[{"$graphLookup": `+tt.stage+`}]`, nil)
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}

// A top-level connectToField is looked up in an index; a dotted one is
// scanned with the query. Both must find the same documents: arrays by
// element, 1 and 1.0 as equal, null as missing too.
func TestGraphLookupIndexMatchesScan(t *testing.T) {
	t.Parallel()
	values := []string{`1`, `1.0`, `2`, `[2, 3]`, `[]`, `null`, `"a"`, `{"x": 1}`, `[null]`, `{"$numberLong": "3"}`}
	var coll []string
	for i, v := range values {
		next := values[(i+3)%len(values)]
		coll = append(coll, fmt.Sprintf(`{"_id": %d, "k": %s, "w": {"k": %s}, "next": %s}`, i, v, v, next))
	}
	coll = append(coll, `{"_id": 100, "next": 1}`) // k missing
	env := mapEnv{"g": docs(t, coll...)}
	for _, start := range append(values, `"none"`) {
		in := docs(t, `{"_id": "s", "start": `+start+`}`)
		var got [2]string
		for i, to := range []string{"k", "w.k"} {
			p, err := CompilePipeline(stages(t, `[{"$graphLookup": {"from": "g", "startWith": "$start", "connectFromField": "next", "connectToField": "`+to+`", "as": "r", "depthField": "d"}}, {"$project": {"r": {"$map": {"input": "$r", "in": ["$$this._id", "$$this.d"]}}}}]`))
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(env, in)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = out[0].String()
		}
		if got[0] != got[1] {
			t.Errorf("startWith %s:\nindexed %s\nscanned %s", start, got[0], got[1])
		}
	}
}
