package mql

import (
	"slices"
	"testing"
)

// Query semantics checked against MongoDB 7.0. Sources, where the answer
// was looked up rather than known: the 7.0 server's expression_leaf.cpp
// (ComparisonMatchExpression, InMatchExpression, ModMatchExpression) and
// expression_parser.cpp (parseMOD, $size via
// BSONElement::parseIntegerElementToNonNegativeInt, parseAll); the manual's
// "Compatibility Changes in MongoDB 8.0" for null and undefined; and
// "Comparison/Sort Order" for arrays in sorts.
func TestFilterSemantics7(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter, doc string
		want        bool
	}{
		// Before 8.0, {f: null} matched undefined and arrays holding it,
		// for $eq and $in alike; $gte/$lte null share the rule.
		"null matches undefined":          {`{"a": null}`, `{"a": {"$undefined": true}}`, true},
		"eq null matches undefined":       {`{"a": {"$eq": null}}`, `{"a": {"$undefined": true}}`, true},
		"null matches undefined in array": {`{"a": null}`, `{"a": ["x", {"$undefined": true}]}`, true},
		"in null matches undefined":       {`{"a": {"$in": [null, 5]}}`, `{"a": {"$undefined": true}}`, true},
		"gte null matches undefined":      {`{"a": {"$gte": null}}`, `{"a": {"$undefined": true}}`, true},
		"lt null not undefined":           {`{"a": {"$lt": null}}`, `{"a": {"$undefined": true}}`, false},
		"ne null excludes undefined":      {`{"a": {"$ne": null}}`, `{"a": {"$undefined": true}}`, false},
		"nin null excludes undefined":     {`{"a": {"$nin": [null]}}`, `{"a": {"$undefined": true}}`, false},
		// $type "number" matches any numeric type, also inside arrays.
		"type number int":      {`{"a": {"$type": "number"}}`, `{"a": 1}`, true},
		"type number long":     {`{"a": {"$type": "number"}}`, `{"a": {"$numberLong": "1"}}`, true},
		"type number decimal":  {`{"a": {"$type": "number"}}`, `{"a": {"$numberDecimal": "1"}}`, true},
		"type number string":   {`{"a": {"$type": "number"}}`, `{"a": "1"}`, false},
		"type number in array": {`{"a": {"$type": "number"}}`, `{"a": ["x", 2.5]}`, true},
		"type number missing":  {`{"a": {"$type": "number"}}`, `{}`, false},
		"type array empty":     {`{"a": {"$type": "array"}}`, `{"a": []}`, true},
		"type list":            {`{"a": {"$type": ["string", "number"]}}`, `{"a": 1}`, true},
		// $mod truncates divisor, remainder and dividend toward zero; the
		// sign of the result follows the dividend (C++ %).
		"mod negative divisor":     {`{"a": {"$mod": [-3, 1]}}`, `{"a": 4}`, true},
		"mod negative dividend":    {`{"a": {"$mod": [3, -1]}}`, `{"a": -4}`, true},
		"mod negative no match":    {`{"a": {"$mod": [3, 2]}}`, `{"a": -4}`, false},
		"mod fractional divisor":   {`{"a": {"$mod": [2.5, 1]}}`, `{"a": 5}`, true},
		"mod fractional remainder": {`{"a": {"$mod": [3, 1.9]}}`, `{"a": 4}`, true},
		"mod fractional dividend":  {`{"a": {"$mod": [3, 1]}}`, `{"a": -2.9}`, false},
		"mod fractional dividend2": {`{"a": {"$mod": [3, 1]}}`, `{"a": 4.9}`, true},
		"mod huge dividend":        {`{"a": {"$mod": [3, 1]}}`, `{"a": 1e30}`, false},
		"mod nan dividend":         {`{"a": {"$mod": [3, 0]}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		"mod not number":           {`{"a": {"$mod": [3, 0]}}`, `{"a": "3"}`, false},
		"mod array element":        {`{"a": {"$mod": [3, 0]}}`, `{"a": [1, 6]}`, true},
		// $all with $elemMatch: each clause may match a different element.
		"all elemMatch each":      {`{"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		"all elemMatch same elem": {`{"a": {"$all": [{"$elemMatch": {"b": 1, "c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		"all elemMatch scalar":    {`{"a": {"$all": [{"$elemMatch": {"$gt": 5}}]}}`, `{"a": [1, 7]}`, true},
		"all regex":               {`{"a": {"$all": [{"$regularExpression": {"pattern": "^x", "options": ""}}, "yz"]}}`, `{"a": ["xa", "yz"]}`, true},
		// $in with regular expressions matches strings and the same regex.
		"in regex string":       {`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": "i"}}, 5]}}`, `{"a": "Xy"}`, true},
		"in regex array elem":   {`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, `{"a": ["y", "xz"]}`, true},
		"in regex stored regex": {`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, `{"a": {"$regularExpression": {"pattern": "^x", "options": ""}}}`, true},
		"in regex other value":  {`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, `{"a": 1}`, false},
		// $exists: false through arrays: any element having the field
		// makes it exist.
		"exists false some have":  {`{"a.b": {"$exists": false}}`, `{"a": [{"b": 1}, {"c": 1}]}`, false},
		"exists false none have":  {`{"a.b": {"$exists": false}}`, `{"a": [{"c": 1}]}`, true},
		"exists false index":      {`{"a.0": {"$exists": false}}`, `{"a": []}`, true},
		"exists false null value": {`{"a.b": {"$exists": false}}`, `{"a": [{"b": null}]}`, false},
		// $not with a regex object matches everything the regex does not,
		// including missing fields and other types.
		"not regex match":   {`{"a": {"$not": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, `{"a": "xy"}`, false},
		"not regex other":   {`{"a": {"$not": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, `{"a": 1}`, true},
		"not regex missing": {`{"a": {"$not": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, `{}`, true},
		"not regex array":   {`{"a": {"$not": {"$regularExpression": {"pattern": "^x", "options": ""}}}}`, `{"a": ["y", "xa"]}`, false},
		"not $regex":        {`{"a": {"$not": {"$regex": "^X", "$options": "i"}}}`, `{"a": "xy"}`, false},
		// Dotted paths: arrays of documents are entered at every level,
		// arrays directly inside arrays are not.
		"dotted two arrays":          {`{"a.b.c": 1}`, `{"a": [{"b": [{"c": 2}, {"c": 1}]}]}`, true},
		"dotted leaf array":          {`{"a.b.c": 1}`, `{"a": [{"b": [{"c": [3, 1]}]}]}`, true},
		"dotted nested array no":     {`{"a.b.c": 1}`, `{"a": [[{"b": {"c": 1}}]]}`, false},
		"dotted two arrays no":       {`{"a.b.c": 1}`, `{"a": [{"b": [{"c": 2}]}, {"b": {"c": 3}}]}`, false},
		"numeric component index":    {`{"a.0.b": 1}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		"numeric component only 0":   {`{"a.0.b": 1}`, `{"a": [{"b": 2}, {"b": 1}]}`, false},
		"numeric component field":    {`{"a.0.b": 1}`, `{"a": {"0": {"b": 1}}}`, true},
		"numeric component doc key":  {`{"a.1": 5}`, `{"a": [{"1": 5}]}`, true},
		"numeric in nested array no": {`{"a.1": 2}`, `{"a": [[1, 2]]}`, false},
		"numeric then array":         {`{"a.0": 2}`, `{"a": [[1, 2]]}`, true},
		// $size applies to the array itself, never to nested arrays.
		"size nested no":  {`{"a": {"$size": 0}}`, `{"a": [[]]}`, false},
		"size dotted":     {`{"a.b": {"$size": 1}}`, `{"a": [{"b": [1]}]}`, true},
		"size whole dbl":  {`{"a": {"$size": 2.0}}`, `{"a": [1, 2]}`, true},
		"size not array":  {`{"a": {"$size": 1}}`, `{"a": "x"}`, false},
		"range on arrays": {`{"a": {"$gt": 1, "$lt": 3}}`, `{"a": [0, 4]}`, true},
		"elemMatch range": {`{"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}`, `{"a": [0, 4]}`, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(doc(t, tt.filter))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(doc(t, tt.doc)); got != tt.want {
				t.Fatalf("%s on %s = %v, want %v", tt.filter, tt.doc, got, tt.want)
			}
		})
	}
}

func TestFilterSemanticsErrors7(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter string
		code   int32
		msg    string
	}{
		"eq undefined":       {`{"a": {"$undefined": true}}`, 2, "cannot compare to undefined"},
		"op undefined":       {`{"a": {"$gte": {"$undefined": true}}}`, 2, "cannot compare to undefined"},
		"ne undefined":       {`{"a": {"$ne": {"$undefined": true}}}`, 2, "cannot compare to undefined"},
		"in undefined":       {`{"a": {"$in": [1, {"$undefined": true}]}}`, 2, "InMatchExpression equality cannot be undefined"},
		"nin undefined":      {`{"a": {"$nin": [{"$undefined": true}]}}`, 2, "InMatchExpression equality cannot be undefined"},
		"size fraction":      {`{"a": {"$size": 1.5}}`, 2, "Failed to parse $size. Expected an integer: $size: 1.5"},
		"size string":        {`{"a": {"$size": "1"}}`, 2, `Failed to parse $size. Expected a number in: $size: "1"`},
		"size negative":      {`{"a": {"$size": -1}}`, 2, "Failed to parse $size. Expected a positive number in: $size: -1"},
		"size nan":           {`{"a": {"$size": {"$numberDouble": "NaN"}}}`, 2, "Failed to parse $size. Expected an integer, but found NaN in: $size: nan.0"},
		"size too big":       {`{"a": {"$size": {"$numberLong": "3000000000"}}}`, 2, "Failed to parse $size. Cannot represent as a 32-bit integer: $size: 3000000000"},
		"mod divisor zero":   {`{"a": {"$mod": [0.5, 0]}}`, 2, "divisor cannot be 0"},
		"mod divisor type":   {`{"a": {"$mod": ["a", 1, 2]}}`, 2, "malformed mod, divisor not a number"},
		"mod remainder type": {`{"a": {"$mod": [1, "a"]}}`, 2, "malformed mod, remainder not a number"},
		"mod one":            {`{"a": {"$mod": [1]}}`, 2, "malformed mod, not enough elements"},
		"mod three":          {`{"a": {"$mod": [1, 2, 3]}}`, 2, "malformed mod, too many elements"},
		"mod huge":           {`{"a": {"$mod": [1e30, 1]}}`, 2, "malformed mod, divisor value is invalid :: caused by :: Out of bounds coercing to integral value"},
		"mod nan remainder":  {`{"a": {"$mod": [2, {"$numberDouble": "NaN"}]}}`, 2, "malformed mod, remainder value is invalid :: caused by :: Unable to coerce NaN/Inf to integral type"},
		// mongod's message starts with a space here (an empty operator
		// name before it), as FerretDB's compatibility tests record.
		"regex bad option":  {`{"a": {"$regex": "x", "$options": "q"}}`, 51108, " invalid flag in regex options: q"},
		"regex bad literal": {`{"a": {"$regularExpression": {"pattern": "x", "options": "iq"}}}`, 51108, " invalid flag in regex options: q"},
		"all elemMatch mix": {`{"a": {"$all": [{"$elemMatch": {"b": 1}}, 1]}}`, 2, "$all/$elemMatch has to be consistent"},
		"all late operator": {`{"a": {"$all": [1, {"$elemMatch": {"b": 1}}]}}`, 2, "no $ expressions in $all"},
		"type unknown":      {`{"a": {"$type": "numbr"}}`, 2, "Unknown type name alias: numbr"},
		"not empty":         {`{"a": {"$not": {}}}`, 2, "$not cannot be empty"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileFilter(doc(t, tt.filter))
			wantCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestSortSemantics7(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		sort string
		in   []string
		want []int // the "i" fields in sorted order
	}{
		// Ascending takes an array's smallest element, descending its
		// largest, each by the full BSON order across types.
		"mixed array asc":  {`{"a": 1}`, []string{`{"i": 0, "a": "b"}`, `{"i": 1, "a": [1, "z"]}`, `{"i": 2, "a": 2}`}, []int{1, 2, 0}},
		"mixed array desc": {`{"a": -1}`, []string{`{"i": 0, "a": "b"}`, `{"i": 1, "a": [1, "z"]}`, `{"i": 2, "a": 2}`}, []int{1, 0, 2}},
		// An empty array sorts before null and missing.
		"empty array": {`{"a": 1}`, []string{`{"i": 0, "a": null}`, `{"i": 1}`, `{"i": 2, "a": []}`}, []int{2, 0, 1}},
		// An array inside an array is one element, compared as an array.
		"nested array": {`{"a": 1}`, []string{`{"i": 0, "a": [[0]]}`, `{"i": 1, "a": [5]}`}, []int{1, 0}},
		"types":        {`{"a": 1}`, []string{`{"i": 0, "a": true}`, `{"i": 1, "a": {"$oid": "000000000000000000000000"}}`, `{"i": 2, "a": {"$binary": {"base64": "", "subType": "00"}}}`, `{"i": 3, "a": [[1]]}`, `{"i": 4, "a": {"x": 1}}`}, []int{4, 3, 2, 1, 0}},
		"numbers":      {`{"a": 1}`, []string{`{"i": 0, "a": {"$numberDecimal": "2.5"}}`, `{"i": 1, "a": {"$numberLong": "2"}}`, `{"i": 2, "a": 2.25}`}, []int{1, 2, 0}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := CompileSort(doc(t, tt.sort))
			if err != nil {
				t.Fatal(err)
			}
			ds := docs(t, tt.in...)
			s.SortDocs(ds)
			var got []int
			for _, d := range ds {
				got = append(got, int(d.Lookup("i").Int32()))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got order %v, want %v", got, tt.want)
			}
		})
	}
}

// Predicates never report part of a constraint: an $in holding null would
// lose the documents missing the field if an index answered it.
func TestPredicatesAreSafeForIndexes(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter string
		want   map[string]string // path -> op
	}{
		"in with null":     {`{"a": {"$in": [1, null]}, "b": 2}`, map[string]string{"b": "$eq"}},
		"in only null":     {`{"a": {"$in": [null]}}`, map[string]string{}},
		"in with regex":    {`{"a": {"$in": [1, {"$regularExpression": {"pattern": "x", "options": ""}}]}}`, map[string]string{}},
		"in with array":    {`{"a": {"$in": [1, [2]]}}`, map[string]string{}},
		"in plain":         {`{"a": {"$in": [1, "x"]}}`, map[string]string{"a": "$in"}},
		"in empty":         {`{"a": {"$in": []}}`, map[string]string{"a": "$in"}},
		"eq null":          {`{"a": null}`, map[string]string{}},
		"eq op null":       {`{"a": {"$eq": null}}`, map[string]string{}},
		"gte null":         {`{"a": {"$gte": null}}`, map[string]string{}},
		"eq array":         {`{"a": [1]}`, map[string]string{}},
		"and in with null": {`{"$and": [{"a": {"$in": [null, 2]}}, {"a": {"$gt": 0}}]}`, map[string]string{"a": "$gt"}},
		"nin":              {`{"a": {"$nin": [1]}}`, map[string]string{}},
		"or of two":        {`{"$or": [{"a": 1}, {"b": 1}]}`, map[string]string{}},
		"range":            {`{"a": {"$gte": 1, "$lt": 5}}`, map[string]string{"a": "$gte|$lt"}},
		"minkey bound":     {`{"a": {"$gt": {"$minKey": 1}}}`, map[string]string{}},
		"nan bound":        {`{"a": {"$gt": {"$numberDouble": "NaN"}}}`, map[string]string{}},
		"elemMatch":        {`{"a": {"$elemMatch": {"b": 1}}}`, map[string]string{}},
		"dotted eq":        {`{"a.b": "x"}`, map[string]string{"a.b": "$eq"}},
		"not":              {`{"a": {"$not": {"$eq": 1}}}`, map[string]string{}},
		"expr":             {`{"$expr": {"$eq": ["$a", 1]}}`, map[string]string{}},
		"single clause or": {`{"$or": [{"a": 1}]}`, map[string]string{"a": "$eq"}},
		"ne":               {`{"a": {"$ne": 1}}`, map[string]string{}},
		"eq document":      {`{"a": {"x": 1}}`, map[string]string{"a": "$eq"}},
		"regex":            {`{"a": {"$regex": "^x"}}`, map[string]string{}},
		"exists":           {`{"a": {"$exists": true}}`, map[string]string{}},
		"in and lte":       {`{"a": {"$in": [1, 2]}, "c": {"$lte": "z"}}`, map[string]string{"a": "$in", "c": "$lte"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(doc(t, tt.filter))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, p := range f.Predicates() {
				if got[p.Path] != "" {
					got[p.Path] += "|"
				}
				got[p.Path] += p.Op
				if p.Op != "$in" && len(p.Values) != 1 {
					t.Errorf("%s predicate on %s has %d values", p.Op, p.Path, len(p.Values))
				}
				for _, v := range p.Values {
					if !indexable(v) {
						t.Errorf("predicate on %s carries %s", p.Path, v)
					}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got predicates %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("predicate %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestRegexExpressionBadFlag(t *testing.T) {
	t.Parallel()
	e, err := CompileExpr(val(t, `{"$regexMatch": {"input": "abc", "regex": "a", "options": "iq"}}`))
	if err == nil {
		_, err = e.Eval(doc(t, `{}`))
	}
	wantCode(t, err, 51108, "$regexMatch invalid flag in regex options: q")
}
