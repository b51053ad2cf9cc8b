package mql

import (
	"testing"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter string
		doc    string
		want   bool
	}{
		"empty":                      {`{}`, `{"a": 1}`, true},
		"eq":                         {`{"a": 1}`, `{"a": 1}`, true},
		"eq cross-type":              {`{"a": 1}`, `{"a": {"$numberLong": "1"}}`, true},
		"eq double":                  {`{"a": 1.0}`, `{"a": 1}`, true},
		"eq decimal":                 {`{"a": {"$numberDecimal": "1.00"}}`, `{"a": 1}`, true},
		"eq mismatch":                {`{"a": 1}`, `{"a": 2}`, false},
		"eq string vs number":        {`{"a": "1"}`, `{"a": 1}`, false},
		"eq array element":           {`{"a": 2}`, `{"a": [1, 2, 3]}`, true},
		"eq whole array":             {`{"a": [1, 2]}`, `{"a": [1, 2]}`, true},
		"eq whole array order":       {`{"a": [2, 1]}`, `{"a": [1, 2]}`, false},
		"eq nested array element":    {`{"a": [1, 2]}`, `{"a": [[1, 2], 3]}`, true},
		"eq doc order matters":       {`{"a": {"x": 1, "y": 2}}`, `{"a": {"y": 2, "x": 1}}`, false},
		"null matches missing":       {`{"a": null}`, `{"b": 1}`, true},
		"null matches null":          {`{"a": null}`, `{"a": null}`, true},
		"null not value":             {`{"a": null}`, `{"a": 0}`, false},
		"null dotted through array":  {`{"a.b": null}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		"null dotted all have":       {`{"a.b": null}`, `{"a": [{"b": 1}, {"b": 2}]}`, false},
		"null array with null":       {`{"a": null}`, `{"a": [1, null]}`, true},
		"dotted doc":                 {`{"a.b": 1}`, `{"a": {"b": 1}}`, true},
		"dotted array of docs":       {`{"a.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		"dotted array index":         {`{"a.1": 5}`, `{"a": [4, 5]}`, true},
		"dotted array index miss":    {`{"a.0": 5}`, `{"a": [4, 5]}`, false},
		"dotted index then field":    {`{"a.1.b": 5}`, `{"a": [{"b": 4}, {"b": 5}]}`, true},
		"dotted nested arrays no":    {`{"a.b": 1}`, `{"a": [[{"b": 1}]]}`, false},
		"dotted scalar":              {`{"a.b": 1}`, `{"a": 1}`, false},
		"ne":                         {`{"a": {"$ne": 1}}`, `{"a": 2}`, true},
		"ne missing":                 {`{"a": {"$ne": 1}}`, `{}`, true},
		"ne array containing":        {`{"a": {"$ne": 1}}`, `{"a": [1, 2]}`, false},
		"ne null excludes missing":   {`{"a": {"$ne": null}}`, `{}`, false},
		"gt":                         {`{"a": {"$gt": 1}}`, `{"a": 2}`, true},
		"gt brackets":                {`{"a": {"$gt": 1}}`, `{"a": "x"}`, false},
		"gt array element":           {`{"a": {"$gt": 5}}`, `{"a": [1, 10]}`, true},
		"gte null matches missing":   {`{"a": {"$gte": null}}`, `{}`, true},
		"gt null matches nothing":    {`{"a": {"$gt": null}}`, `{"a": 1}`, false},
		"lt NaN no":                  {`{"a": {"$lt": 5}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		"gte NaN NaN":                {`{"a": {"$gte": {"$numberDouble": "NaN"}}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		"gt minKey":                  {`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": "x"}`, true},
		"range same element not req": {`{"a": {"$gt": 1, "$lt": 3}}`, `{"a": [0, 5]}`, true},
		"lte date":                   {`{"a": {"$lte": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": {"$date": "2019-01-01T00:00:00Z"}}`, true},
		"in":                         {`{"a": {"$in": [1, 2]}}`, `{"a": 2}`, true},
		"in array":                   {`{"a": {"$in": [5, 2]}}`, `{"a": [1, 2]}`, true},
		"in null missing":            {`{"a": {"$in": [null]}}`, `{}`, true},
		"in regex":                   {`{"a": {"$in": [{"$regularExpression": {"pattern": "^x", "options": ""}}]}}`, `{"a": "xyz"}`, true},
		"in long list":               {`{"a": {"$in": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, "x", 2.5]}}`, `{"a": [0, {"$numberLong": "17"}]}`, true},
		"in long list miss":          {`{"a": {"$in": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, "x", 2.5]}}`, `{"a": "y"}`, false},
		"in long list regex":         {`{"a": {"$in": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, {"$regularExpression": {"pattern": "^y", "options": ""}}]}}`, `{"a": "yes"}`, true},
		"in empty":                   {`{"a": {"$in": []}}`, `{"a": 1}`, false},
		"nin":                        {`{"a": {"$nin": [1, 2]}}`, `{"a": 3}`, true},
		"nin array":                  {`{"a": {"$nin": [1]}}`, `{"a": [1, 3]}`, false},
		"nin missing":                {`{"a": {"$nin": [1]}}`, `{}`, true},
		"exists true":                {`{"a": {"$exists": true}}`, `{"a": null}`, true},
		"exists false":               {`{"a": {"$exists": false}}`, `{"a": null}`, false},
		"exists false missing":       {`{"a": {"$exists": 0}}`, `{"b": 1}`, true},
		"exists dotted array":        {`{"a.b": {"$exists": true}}`, `{"a": [{"c": 1}, {"b": 1}]}`, true},
		"type name":                  {`{"a": {"$type": "string"}}`, `{"a": "x"}`, true},
		"type number code":           {`{"a": {"$type": 16}}`, `{"a": 1}`, true},
		"type number alias":          {`{"a": {"$type": "number"}}`, `{"a": 1.5}`, true},
		"type list":                  {`{"a": {"$type": ["string", "bool"]}}`, `{"a": true}`, true},
		"type array":                 {`{"a": {"$type": "array"}}`, `{"a": []}`, true},
		"type element":               {`{"a": {"$type": "string"}}`, `{"a": [1, "x"]}`, true},
		"type missing":               {`{"a": {"$type": "null"}}`, `{}`, false},
		"size":                       {`{"a": {"$size": 2}}`, `{"a": [1, 2]}`, true},
		"size miss":                  {`{"a": {"$size": 1}}`, `{"a": [1, 2]}`, false},
		"size not array":             {`{"a": {"$size": 1}}`, `{"a": 1}`, false},
		"size fractional":            {`{"a": {"$size": 0}}`, `{"a": []}`, true},
		"all":                        {`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3, 1]}`, true},
		"all miss":                   {`{"a": {"$all": [1, 4]}}`, `{"a": [2, 3, 1]}`, false},
		"all empty":                  {`{"a": {"$all": []}}`, `{"a": [1]}`, false},
		"all scalar":                 {`{"a": {"$all": [1]}}`, `{"a": 1}`, true},
		"all elemMatch":              {`{"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"b": 2}}]}}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		"elemMatch query":            {`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 1}, {"b": 1, "c": 2}]}`, true},
		"elemMatch query split":      {`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}`, false},
		"elemMatch value":            {`{"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}`, `{"a": [0, 2, 5]}`, true},
		"elemMatch value split":      {`{"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}}`, `{"a": [0, 5]}`, false},
		"elemMatch null in array":    {`{"a": {"$elemMatch": {"b": null}}}`, `{"a": [[]]}`, true},
		"dotted null value array":    {`{"a.b": null}`, `{"a": [1, "s"]}`, true},
		"dotted null empty array":    {`{"a.b": null}`, `{"a": []}`, true},
		// MongoDB 7.0 matches undefined with null ("Compatibility Changes in MongoDB 8.0": before 8.0, {name: null} matched undefined and arrays holding undefined).
		"dotted null undefined":       {`{"a.b": null}`, `{"a": [{"b": {"$undefined": true}}, {"b": 3}]}`, true},
		"nin empty array":             {`{"a": {"$nin": [null, []]}}`, `{"a": [[]]}`, false},
		"elemMatch not array":         {`{"a": {"$elemMatch": {"$gt": 1}}}`, `{"a": 5}`, false},
		"elemMatch value ne":          {`{"a": {"$elemMatch": {"$ne": 1}}}`, `{"a": [1, 1]}`, false},
		"regex":                       {`{"a": {"$regex": "^ab"}}`, `{"a": "abc"}`, true},
		"regex options":               {`{"a": {"$regex": "^AB", "$options": "i"}}`, `{"a": "abc"}`, true},
		"regex literal":               {`{"a": {"$regularExpression": {"pattern": "b", "options": ""}}}`, `{"a": ["x", "abc"]}`, true},
		"regex not string":            {`{"a": {"$regex": "1"}}`, `{"a": 1}`, false},
		"regex multiline":             {`{"a": {"$regex": "^b", "$options": "m"}}`, `{"a": "a\nb"}`, true},
		"regex extended":              {`{"a": {"$regex": "a b # c", "$options": "x"}}`, `{"a": "ab"}`, true},
		"not regex":                   {`{"a": {"$not": {"$regularExpression": {"pattern": "^a", "options": ""}}}}`, `{"a": "b"}`, true},
		"not op":                      {`{"a": {"$not": {"$gt": 5}}}`, `{"a": 3}`, true},
		"not op missing":              {`{"a": {"$not": {"$gt": 5}}}`, `{}`, true},
		"not op false":                {`{"a": {"$not": {"$gt": 5}}}`, `{"a": 6}`, false},
		"mod":                         {`{"a": {"$mod": [4, 1]}}`, `{"a": 5}`, true},
		"mod double truncates":        {`{"a": {"$mod": [4, 1]}}`, `{"a": 5.9}`, true},
		"mod negative":                {`{"a": {"$mod": [4, -1]}}`, `{"a": -5}`, true},
		"mod not number":              {`{"a": {"$mod": [4, 1]}}`, `{"a": "5"}`, false},
		"and":                         {`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 2}`, true},
		"or":                          {`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 2}`, true},
		"nor":                         {`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 2}`, false},
		"implicit and":                {`{"a": 1, "b": 2}`, `{"a": 1, "b": 3}`, false},
		"expr":                        {`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 3, "b": 2}`, true},
		"expr false":                  {`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 1, "b": 2}`, false},
		"dbref equality":              {`{"r": {"$ref": "c", "$id": 1}}`, `{"r": {"$ref": "c", "$id": 1}}`, true},
		"top-level $id field":         {`{"$id": 5}`, `{"$id": 5}`, true},
		"comment":                     {`{"a": 1, "$comment": "x"}`, `{"a": 1}`, true},
		"embedded doc with dollar":    {`{"a": {"b": 1, "$c": 2}}`, `{"a": {"b": 1, "$c": 2}}`, true},
		"id objectid":                 {`{"_id": {"$oid": "5f0000000000000000000001"}}`, `{"_id": {"$oid": "5f0000000000000000000001"}}`, true},
		"eq regex value exact":        {`{"a": {"$eq": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, `{"a": "x"}`, false},
		"dotted missing intermediate": {`{"a.b.c": {"$exists": false}}`, `{"a": {"x": 1}}`, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(doc(t, tc.filter))
			if err != nil {
				t.Fatalf("compile %s: %v", tc.filter, err)
			}
			if got := f.Match(doc(t, tc.doc)); got != tc.want {
				t.Errorf("%s on %s = %v, want %v", tc.filter, tc.doc, got, tc.want)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter string
		code   int32
		msg    string
	}{
		"unknown op":          {`{"a": {"$foo": 1}}`, mongoerr.BadValue, "unknown operator: $foo"},
		"unknown top":         {`{"$foo": 1}`, mongoerr.BadValue, "unknown top level operator: $foo"},
		"in not array":        {`{"a": {"$in": 1}}`, mongoerr.BadValue, "$in needs an array"},
		"nin not array":       {`{"a": {"$nin": 1}}`, mongoerr.BadValue, "$nin needs an array"},
		"all not array":       {`{"a": {"$all": 1}}`, mongoerr.BadValue, "$all needs an array"},
		"and not array":       {`{"$and": 1}`, mongoerr.BadValue, "$and must be an array"},
		"and empty":           {`{"$and": []}`, mongoerr.BadValue, "$and/$or/$nor must be a nonempty array"},
		"or entry":            {`{"$or": [1]}`, mongoerr.BadValue, "$or/$and/$nor entries need to be full objects"},
		"size string":         {`{"a": {"$size": "x"}}`, mongoerr.BadValue, `Failed to parse $size. Expected a number in: $size: "x"`},
		"size negative":       {`{"a": {"$size": -1}}`, mongoerr.BadValue, "Failed to parse $size. Expected a positive number in: $size: -1"},
		"type unknown":        {`{"a": {"$type": "foo"}}`, mongoerr.BadValue, "Unknown type name alias: foo"},
		"type code":           {`{"a": {"$type": 99}}`, mongoerr.BadValue, "Invalid numerical type code: 99"},
		"type bad":            {`{"a": {"$type": true}}`, mongoerr.TypeMismatch, ""},
		"mod not array":       {`{"a": {"$mod": 1}}`, mongoerr.BadValue, "malformed mod, needs to be an array"},
		"mod short":           {`{"a": {"$mod": [1]}}`, mongoerr.BadValue, "malformed mod, not enough elements"},
		"mod long":            {`{"a": {"$mod": [1, 2, 3]}}`, mongoerr.BadValue, "malformed mod, too many elements"},
		"mod divisor":         {`{"a": {"$mod": ["x", 2]}}`, mongoerr.BadValue, "malformed mod, divisor not a number"},
		"mod remainder":       {`{"a": {"$mod": [1, "x"]}}`, mongoerr.BadValue, "malformed mod, remainder not a number"},
		"mod zero":            {`{"a": {"$mod": [0, 1]}}`, mongoerr.BadValue, "divisor cannot be 0"},
		"not empty":           {`{"a": {"$not": {}}}`, mongoerr.BadValue, "$not cannot be empty"},
		"not scalar":          {`{"a": {"$not": 1}}`, mongoerr.BadValue, "$not needs a regex or a document"},
		"elemMatch scalar":    {`{"a": {"$elemMatch": 1}}`, mongoerr.BadValue, "$elemMatch needs an Object"},
		"options alone":       {`{"a": {"$options": "i"}}`, mongoerr.BadValue, "$options needs a $regex"},
		"regex not string":    {`{"a": {"$regex": 1}}`, mongoerr.BadValue, "$regex has to be a string"},
		"regex bad option":    {`{"a": {"$regex": "x", "$options": "z"}}`, 51108, ""},
		"regex invalid":       {`{"a": {"$regex": "("}}`, 51091, ""},
		"in nested operator":  {`{"a": {"$in": [{"$gt": 1}]}}`, mongoerr.BadValue, "cannot nest $ under $in"},
		"expr unknown":        {`{"$expr": {"$foo": 1}}`, mongoerr.InvalidPipelineOperator, "Unrecognized expression '$foo'"},
		"ne regex":            {`{"a": {"$ne": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, mongoerr.BadValue, "Can't have regex as arg to $ne."},
		"gt regex":            {`{"a": {"$gt": {"$regularExpression": {"pattern": "x", "options": ""}}}}`, mongoerr.BadValue, "Can't have RegEx as arg to predicate over field 'a'."},
		"size fraction":       {`{"a": {"$size": 1.5}}`, mongoerr.BadValue, "Failed to parse $size. Expected an integer: $size: 1.5"},
		"all inconsistent":    {`{"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}}`, mongoerr.BadValue, "$all/$elemMatch has to be consistent"},
		"type empty":          {`{"a": {"$type": []}}`, mongoerr.FailedToParse, ""},
		"field where":         {`{"a": {"$where": "1"}}`, mongoerr.BadValue, "$where cannot be applied to a field"},
		"regex options twice": {`{"a": {"$regex": {"$regularExpression": {"pattern": "x", "options": "i"}}, "$options": "m"}}`, 51075, ""},
		"where not supported": {`{"$where": "1"}`, mongoerr.BadValue, ""},
		"mixed op and field":  {`{"a": {"$gt": 1, "b": 2}}`, mongoerr.BadValue, "unknown operator: b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileFilter(doc(t, tc.filter))
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestMatchPositional(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		filter, doc string
		want        int
	}{
		"element":      {`{"a": 3}`, `{"a": [1, 2, 3]}`, 2},
		"dotted":       {`{"a.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, 1},
		"elemMatch":    {`{"a": {"$elemMatch": {"$gt": 1}}}`, `{"a": [0, 5]}`, 1},
		"no array":     {`{"a": 1}`, `{"a": 1}`, -1},
		"second field": {`{"x": 1, "a": {"$gt": 4}}`, `{"x": 1, "a": [1, 5]}`, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(doc(t, tc.filter))
			if err != nil {
				t.Fatal(err)
			}
			ok, i := f.MatchPositional(doc(t, tc.doc))
			if !ok || i != tc.want {
				t.Errorf("got (%v, %d), want (true, %d)", ok, i, tc.want)
			}
		})
	}
}

func TestEqualityFieldsAndPredicates(t *testing.T) {
	t.Parallel()
	f, err := CompileFilter(doc(t, `{"a.b": 1, "$and": [{"c": {"$eq": "x"}}, {"d": {"$gt": 5}}], "_id": 7, "e": {"$in": [1, 2]}, "n": null, "r": {"$regularExpression": {"pattern": "x", "options": ""}}, "$or": [{"o": 3}], "i": {"$in": [4]}}`))
	if err != nil {
		t.Fatal(err)
	}
	eq := f.EqualityFields()
	raw, err := marshalD(eq)
	if err != nil {
		t.Fatal(err)
	}
	sameDoc(t, raw, `{"_id": 7, "a": {"b": 1}, "c": "x", "n": null, "o": 3, "i": 4}`)
	preds := f.Predicates()
	got := map[string]string{}
	for _, p := range preds {
		got[p.Path] = p.Op
	}
	want := map[string]string{"a.b": "$eq", "c": "$eq", "d": "$gt", "_id": "$eq", "e": "$in", "o": "$eq", "i": "$in"}
	if len(got) != len(want) {
		t.Fatalf("got predicates %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("predicate %s = %q, want %q", k, got[k], v)
		}
	}
}
