package mql

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func applyUpdate(t *testing.T, update, filters []string, in string, opts ApplyOptions) (bson.Raw, error) {
	t.Helper()
	var afs []bson.Raw
	for _, f := range filters {
		afs = append(afs, doc(t, f))
	}
	u, err := CompileUpdate(val(t, update[0]), afs)
	if err != nil {
		return nil, err
	}
	return u.Apply(doc(t, in), opts)
}

func TestUpdateApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := map[string]struct {
		update  string
		filters []string
		in      string
		opts    ApplyOptions
		want    string
	}{
		"set":                    {update: `{"$set": {"a": 2}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 2}`},
		"set new field appended": {update: `{"$set": {"b": 2}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 1, "b": 2}`},
		"set sorted new fields":  {update: `{"$set": {"z": 1, "b": 2}}`, in: `{"_id": 1}`, want: `{"_id": 1, "b": 2, "z": 1}`},
		"set numeric order":      {update: `{"$set": {"a.10": 1, "a.9": 2}}`, in: `{"_id": 1, "a": {}}`, want: `{"_id": 1, "a": {"9": 2, "10": 1}}`},
		"set dotted create":      {update: `{"$set": {"a.b.c": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": {"b": {"c": 1}}}`},
		"set dotted existing":    {update: `{"$set": {"a.b": 2}}`, in: `{"_id": 1, "a": {"b": 1, "c": 1}}`, want: `{"_id": 1, "a": {"b": 2, "c": 1}}`},
		"set array index":        {update: `{"$set": {"a.1": 9}}`, in: `{"_id": 1, "a": [1, 2, 3]}`, want: `{"_id": 1, "a": [1, 9, 3]}`},
		"set array pad":          {update: `{"$set": {"a.4": 9}}`, in: `{"_id": 1, "a": [1]}`, want: `{"_id": 1, "a": [1, null, null, null, 9]}`},
		"set same id":            {update: `{"$set": {"_id": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1}`},
		"set equal id":           {update: `{"$set": {"_id": 1.0}}`, in: `{"_id": 1}`, want: `{"_id": 1.0}`},
		"replace equal id":       {update: `{"_id": 1.0, "x": 1}`, in: `{"_id": 1}`, want: `{"_id": 1.0, "x": 1}`},
		"set type change":        {update: `{"$set": {"a": 1.0}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 1.0}`},
		"unset":                  {update: `{"$unset": {"a": ""}}`, in: `{"_id": 1, "a": 1, "b": 2}`, want: `{"_id": 1, "b": 2}`},
		"unset missing":          {update: `{"$unset": {"x.y": ""}}`, in: `{"_id": 1, "x": 5}`, want: `{"_id": 1, "x": 5}`},
		"unset array element":    {update: `{"$unset": {"a.0": ""}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [null, 2]}`},
		"inc":                    {update: `{"$inc": {"a": 2}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 3}`},
		"inc missing":            {update: `{"$inc": {"a": 2}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": 2}`},
		"inc double":             {update: `{"$inc": {"a": 0.5}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 1.5}`},
		"inc int32 overflow":     {update: `{"$inc": {"a": 1}}`, in: `{"_id": 1, "a": 2147483647}`, want: `{"_id": 1, "a": {"$numberLong": "2147483648"}}`},
		"inc decimal":            {update: `{"$inc": {"a": {"$numberDecimal": "1.5"}}}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": {"$numberDecimal": "2.5"}}`},
		"mul":                    {update: `{"$mul": {"a": 3}}`, in: `{"_id": 1, "a": 2}`, want: `{"_id": 1, "a": 6}`},
		"mul missing":            {update: `{"$mul": {"a": {"$numberLong": "3"}}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": {"$numberLong": "0"}}`},
		"min lower":              {update: `{"$min": {"a": 1}}`, in: `{"_id": 1, "a": 5}`, want: `{"_id": 1, "a": 1}`},
		"min higher":             {update: `{"$min": {"a": 9}}`, in: `{"_id": 1, "a": 5}`, want: `{"_id": 1, "a": 5}`},
		"max bson order":         {update: `{"$max": {"a": "x"}}`, in: `{"_id": 1, "a": 5}`, want: `{"_id": 1, "a": "x"}`},
		"max missing":            {update: `{"$max": {"a": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": 1}`},
		"rename":                 {update: `{"$rename": {"a": "b"}}`, in: `{"_id": 1, "a": 1, "c": 2}`, want: `{"_id": 1, "c": 2, "b": 1}`},
		"rename nested":          {update: `{"$rename": {"a.x": "b.y"}}`, in: `{"_id": 1, "a": {"x": 1}}`, want: `{"_id": 1, "a": {}, "b": {"y": 1}}`},
		"rename missing":         {update: `{"$rename": {"a": "b"}}`, in: `{"_id": 1}`, want: `{"_id": 1}`},
		"rename overwrite":       {update: `{"$rename": {"a": "b"}}`, in: `{"_id": 1, "a": 1, "b": 2}`, want: `{"_id": 1, "b": 1}`},
		"setOnInsert skipped":    {update: `{"$setOnInsert": {"a": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1}`},
		"setOnInsert upsert":     {update: `{"$setOnInsert": {"a": 1}}`, in: `{"_id": 1}`, opts: ApplyOptions{Upsert: true}, want: `{"_id": 1, "a": 1}`},
		"currentDate":            {update: `{"$currentDate": {"a": true}}`, in: `{"_id": 1}`, opts: ApplyOptions{Now: now}, want: `{"_id": 1, "a": {"$date": "2024-05-06T07:08:09Z"}}`},
		"currentDate timestamp":  {update: `{"$currentDate": {"a": {"$type": "timestamp"}}}`, in: `{"_id": 1}`, opts: ApplyOptions{Now: now}, want: `{"_id": 1, "a": {"$timestamp": {"t": 1714979289, "i": 1}}}`},
		"push":                   {update: `{"$push": {"a": 3}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1, 2, 3]}`},
		"push missing":           {update: `{"$push": {"a": 3}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": [3]}`},
		"push array value":       {update: `{"$push": {"a": [3, 4]}}`, in: `{"_id": 1, "a": []}`, want: `{"_id": 1, "a": [[3, 4]]}`},
		"push each":              {update: `{"$push": {"a": {"$each": [3, 4]}}}`, in: `{"_id": 1, "a": [1]}`, want: `{"_id": 1, "a": [1, 3, 4]}`},
		"push position":          {update: `{"$push": {"a": {"$each": [9], "$position": 0}}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [9, 1, 2]}`},
		"push negative position": {update: `{"$push": {"a": {"$each": [9], "$position": -1}}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1, 9, 2]}`},
		"push slice":             {update: `{"$push": {"a": {"$each": [3], "$slice": -2}}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [2, 3]}`},
		"push sort":              {update: `{"$push": {"a": {"$each": [2], "$sort": -1}}}`, in: `{"_id": 1, "a": [1, 3]}`, want: `{"_id": 1, "a": [3, 2, 1]}`},
		"push sort fields":       {update: `{"$push": {"a": {"$each": [{"s": 2}], "$sort": {"s": 1}, "$slice": 2}}}`, in: `{"_id": 1, "a": [{"s": 3}, {"s": 1}]}`, want: `{"_id": 1, "a": [{"s": 1}, {"s": 2}]}`},
		"addToSet":               {update: `{"$addToSet": {"a": 2}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1, 2]}`},
		"addToSet new":           {update: `{"$addToSet": {"a": 3}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1, 2, 3]}`},
		"addToSet each":          {update: `{"$addToSet": {"a": {"$each": [2, 3, 3]}}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1, 2, 3]}`},
		"pop last":               {update: `{"$pop": {"a": 1}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [1]}`},
		"pop first":              {update: `{"$pop": {"a": -1}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [2]}`},
		"pop missing nested":     {update: `{"$pop": {"a.b.c": 1}}`, in: `{"_id": 1, "a": {"b": {}}}`, want: `{"_id": 1, "a": {"b": {}}}`},
		"unset through scalar":   {update: `{"$unset": {"a.b": 1}}`, in: `{"_id": 1, "a": 5}`, want: `{"_id": 1, "a": 5}`},
		"pop missing":            {update: `{"$pop": {"a": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1}`},
		"pull value":             {update: `{"$pull": {"a": 2}}`, in: `{"_id": 1, "a": [1, 2, 2, 3]}`, want: `{"_id": 1, "a": [1, 3]}`},
		"pull condition":         {update: `{"$pull": {"a": {"$gte": 2}}}`, in: `{"_id": 1, "a": [1, 2, 3]}`, want: `{"_id": 1, "a": [1]}`},
		"pull doc query":         {update: `{"$pull": {"a": {"b": 1}}}`, in: `{"_id": 1, "a": [{"b": 1, "c": 1}, {"b": 2}]}`, want: `{"_id": 1, "a": [{"b": 2}]}`},
		"pull in":                {update: `{"$pull": {"a": {"$in": [1, 3]}}}`, in: `{"_id": 1, "a": [1, 2, 3]}`, want: `{"_id": 1, "a": [2]}`},
		"pullAll":                {update: `{"$pullAll": {"a": [1, 3]}}`, in: `{"_id": 1, "a": [1, 2, 3, 1]}`, want: `{"_id": 1, "a": [2]}`},
		"positional":             {update: `{"$set": {"a.$": 9}}`, in: `{"_id": 1, "a": [1, 2, 3]}`, opts: ApplyOptions{PositionalIndex: 1}, want: `{"_id": 1, "a": [1, 9, 3]}`},
		"positional field":       {update: `{"$inc": {"a.$.n": 1}}`, in: `{"_id": 1, "a": [{"n": 1}, {"n": 5}]}`, opts: ApplyOptions{PositionalIndex: 1}, want: `{"_id": 1, "a": [{"n": 1}, {"n": 6}]}`},
		"all positional":         {update: `{"$inc": {"a.$[]": 1}}`, in: `{"_id": 1, "a": [1, 2]}`, want: `{"_id": 1, "a": [2, 3]}`},
		"all positional nested":  {update: `{"$set": {"a.$[].b": 0}}`, in: `{"_id": 1, "a": [{"b": 1}, {"c": 2}]}`, want: `{"_id": 1, "a": [{"b": 0}, {"c": 2, "b": 0}]}`},
		"array filters":          {update: `{"$set": {"a.$[x]": 0}}`, filters: []string{`{"x": {"$gt": 1}}`}, in: `{"_id": 1, "a": [1, 2, 3]}`, want: `{"_id": 1, "a": [1, 0, 0]}`},
		"array filters field":    {update: `{"$set": {"a.$[e].ok": true}}`, filters: []string{`{"e.n": {"$gte": 5}}`}, in: `{"_id": 1, "a": [{"n": 1}, {"n": 5}]}`, want: `{"_id": 1, "a": [{"n": 1}, {"n": 5, "ok": true}]}`},
		"nested array filters":   {update: `{"$inc": {"a.$[i].b.$[j]": 10}}`, filters: []string{`{"i.k": 1}`, `{"j": {"$lt": 2}}`}, in: `{"_id": 1, "a": [{"k": 1, "b": [1, 2]}, {"k": 2, "b": [1]}]}`, want: `{"_id": 1, "a": [{"k": 1, "b": [11, 2]}, {"k": 2, "b": [1]}]}`},
		"replacement":            {update: `{"x": 1}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "x": 1}`},
		"replacement same id":    {update: `{"_id": 1, "x": 1}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "x": 1}`},
		"replacement empty":      {update: `{}`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1}`},
		"pipeline set":           {update: `[{"$set": {"b": {"$add": ["$a", 1]}}}]`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "a": 1, "b": 2}`},
		"pipeline unset":         {update: `[{"$unset": ["a"]}]`, in: `{"_id": 1, "a": 1, "b": 1}`, want: `{"_id": 1, "b": 1}`},
		"pipeline replaceWith":   {update: `[{"$replaceWith": {"x": "$a"}}]`, in: `{"_id": 1, "a": 1}`, want: `{"_id": 1, "x": 1}`},
		"pipeline project":       {update: `[{"$project": {"a": 1}}]`, in: `{"_id": 1, "a": 1, "b": 2}`, want: `{"_id": 1, "a": 1}`},
		"bit":                    {update: `{"$bit": {"a": {"and": 6}}}`, in: `{"_id": 1, "a": 3}`, want: `{"_id": 1, "a": 2}`},
		"nested dollar field":    {update: `{"$set": {"a.$b": 1}}`, in: `{"_id": 1}`, want: `{"_id": 1, "a": {"$b": 1}}`},
		"multiple ops":           {update: `{"$set": {"a": 1}, "$inc": {"n": 1}, "$unset": {"x": 1}}`, in: `{"_id": 1, "n": 1, "x": 1}`, want: `{"_id": 1, "n": 2, "a": 1}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.opts.PositionalIndex == 0 && name != "positional" {
				tc.opts.PositionalIndex = -1
			}
			got, err := applyUpdate(t, []string{tc.update}, tc.filters, tc.in, tc.opts)
			if err != nil {
				t.Fatalf("apply %s to %s: %v", tc.update, tc.in, err)
			}
			sameDoc(t, got, tc.want)
		})
	}
}

func TestUpdateNoChangeReturnsSameBytes(t *testing.T) {
	t.Parallel()
	in := doc(t, `{"_id": 1, "a": 1, "b": [1, 2]}`)
	for _, upd := range []string{`{"$set": {"a": 1}}`, `{"$addToSet": {"b": 2}}`, `{"$unset": {"zz": 1}}`, `{"$max": {"a": 0}}`, `{"$pull": {"b": 7}}`,
		`{"$set": {"b.1": 2, "a": 1}}`, `{"$inc": {"a": 0}}`, `[{"$set": {"a": 1}}]`} {
		u, err := CompileUpdate(val(t, upd), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := u.Apply(in, ApplyOptions{PositionalIndex: -1})
		if err != nil {
			t.Fatal(err)
		}
		if &got[0] != &in[0] {
			t.Errorf("%s: no-op update returned new bytes %s", upd, got)
		}
	}
}

// Updates that touch several places of one document: the untouched
// parts are copied as they were, the touched ones re-encoded.
func TestUpdateEditsInPlace(t *testing.T) {
	t.Parallel()
	in := `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "x"}, "e": [1, 2, 3], "f": {"g": 1}}`
	tests := map[string]struct{ update, want string }{
		"set deep and shallow": {`{"$set": {"a.b.1.c": 5, "f": 2}}`, `{"_id": 1, "a": {"b": [1, {"c": 5}], "d": "x"}, "e": [1, 2, 3], "f": 2}`},
		"set then unset":       {`{"$set": {"a.d": "y"}, "$unset": {"f.g": ""}}`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "y"}, "e": [1, 2, 3], "f": {}}`},
		"pad and set":          {`{"$set": {"e.5": 6, "a.b.0": 0}}`, `{"_id": 1, "a": {"b": [0, {"c": 2}], "d": "x"}, "e": [1, 2, 3, null, null, 6], "f": {"g": 1}}`},
		"all positional":       {`{"$inc": {"e.$[]": 10}}`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "x"}, "e": [11, 12, 13], "f": {"g": 1}}`},
		"rename across":        {`{"$rename": {"f.g": "a.z"}}`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "x", "z": 1}, "e": [1, 2, 3], "f": {}}`},
		"push and set sibling": {`{"$push": {"e": 4}, "$set": {"a.d": 1}}`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": 1}, "e": [1, 2, 3, 4], "f": {"g": 1}}`},
		"set into new docs":    {`{"$set": {"n.o.p": 1, "a.q.r": 2}}`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "x", "q": {"r": 2}}, "e": [1, 2, 3], "f": {"g": 1}, "n": {"o": {"p": 1}}}`},
		"set object value":     {`{"$set": {"f": {"h": [1]}}, "$unset": {"a.b": ""}}`, `{"_id": 1, "a": {"d": "x"}, "e": [1, 2, 3], "f": {"h": [1]}}`},
		"pipeline nested":      {`[{"$set": {"a.d": "y", "e": {"$size": "$e"}}}]`, `{"_id": 1, "a": {"b": [1, {"c": 2}], "d": "y"}, "e": 3, "f": {"g": 1}}`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := applyUpdate(t, []string{tt.update}, nil, in, ApplyOptions{PositionalIndex: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("invalid BSON %v: %s", err, got)
			}
			sameDoc(t, got, tt.want)
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		update  string
		filters []string
		in      string
		upsert  bool
		code    int32
		msg     string
	}{
		"change id":          {update: `{"$set": {"_id": 2}}`, in: `{"_id": 1}`, code: mongoerr.ImmutableField, msg: "Performing an update on the path '_id' would modify the immutable field '_id'"},
		"unset id":           {update: `{"$unset": {"_id": 1}}`, in: `{"_id": 1}`, code: mongoerr.ImmutableField},
		"set id field":       {update: `{"$set": {"_id.x": 2}}`, in: `{"_id": {"x": 1}}`, code: mongoerr.ImmutableField, msg: "Performing an update on the path '_id.x' would modify the immutable field '_id'"},
		"replace id":         {update: `{"_id": 2, "a": 1}`, in: `{"_id": 1}`, code: mongoerr.ImmutableField, msg: "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
		"pipeline id":        {update: `[{"$set": {"_id": 2}}]`, in: `{"_id": 1}`, code: mongoerr.ImmutableField},
		"conflict":           {update: `{"$set": {"a": 1}, "$inc": {"a": 1}}`, in: `{"_id": 1}`, code: mongoerr.ConflictingUpdateOperators, msg: "Updating the path 'a' would create a conflict at 'a'"},
		"conflict prefix":    {update: `{"$set": {"a": 1}, "$inc": {"a.b": 1}}`, in: `{"_id": 1}`, code: mongoerr.ConflictingUpdateOperators, msg: "Updating the path 'a.b' would create a conflict at 'a'"},
		"inc string":         {update: `{"$inc": {"a": 1}}`, in: `{"_id": 1, "a": "x"}`, code: mongoerr.TypeMismatch, msg: "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string"},
		"inc by string":      {update: `{"$inc": {"a": "x"}}`, in: `{"_id": 1}`, code: mongoerr.TypeMismatch, msg: `Cannot increment with non-numeric argument: {a: "x"}`},
		"inc overflow":       {update: `{"$inc": {"a": 1}}`, in: `{"_id": 1, "a": {"$numberLong": "9223372036854775807"}}`, code: mongoerr.BadValue, msg: "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}"},
		"mul overflow":       {update: `{"$mul": {"a": {"$numberLong": "9223372036854775807"}}}`, in: `{"_id": 1, "a": 2}`, code: mongoerr.BadValue, msg: "Failed to apply $mul operations to current value ((NumberInt)2) for document {_id: 1}"},
		"mul string":         {update: `{"$mul": {"a": 2}}`, in: `{"_id": 1, "a": "x"}`, code: mongoerr.TypeMismatch},
		"empty set":          {update: `{"$set": {}}`, in: `{"_id": 1}`, code: mongoerr.FailedToParse, msg: "'$set' is empty. You must specify a field like so: {$set: {<field>: ...}}"},
		"unknown modifier":   {update: `{"$foo": {"a": 1}}`, in: `{"_id": 1}`, code: mongoerr.FailedToParse, msg: "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array"},
		"set not doc":        {update: `{"$set": 1}`, in: `{"_id": 1}`, code: mongoerr.FailedToParse},
		"dollar field":       {update: `{"$set": {"$a": 1}}`, in: `{"_id": 1}`, code: mongoerr.DollarPrefixedFieldName},
		"two positionals":    {update: `{"$set": {"a.$.b.$": 1}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"positional first":   {update: `{"$set": {"$": 1}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"replacement dollar": {update: `{"a": 1, "$b": 1}`, in: `{"_id": 1}`, code: mongoerr.DollarPrefixedFieldName},
		"empty path":         {update: `{"$set": {"": 1}}`, in: `{"_id": 1}`, code: mongoerr.EmptyFieldName},
		"empty component":    {update: `{"$set": {"a..b": 1}}`, in: `{"_id": 1}`, code: mongoerr.EmptyFieldName},
		"path not viable":    {update: `{"$set": {"a.b": 1}}`, in: `{"_id": 1, "a": 5}`, code: mongoerr.PathNotViable, msg: "Cannot create field 'b' in element {a: 5}"},
		"array field":        {update: `{"$set": {"a.b": 1}}`, in: `{"_id": 1, "a": [1]}`, code: mongoerr.PathNotViable},
		"push not array":     {update: `{"$push": {"a": 1}}`, in: `{"_id": 1, "a": 5}`, code: mongoerr.BadValue, msg: "The field 'a' must be an array but is of type int in document {_id: 1}"},
		"push bad each":      {update: `{"$push": {"a": {"$each": 1}}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"push bad clause":    {update: `{"$push": {"a": {"$each": [1], "$foo": 1}}}`, in: `{"_id": 1}`, code: mongoerr.BadValue, msg: "Unrecognized clause in $push: $foo"},
		"push bad slice":     {update: `{"$push": {"a": {"$each": [1], "$slice": "x"}}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"push bad sort":      {update: `{"$push": {"a": {"$each": [1], "$sort": 2}}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"pop bad":            {update: `{"$pop": {"a": 2}}`, in: `{"_id": 1}`, code: mongoerr.FailedToParse, msg: "$pop expects 1 or -1, found: 2"},
		"pop through scalar": {update: `{"$pop": {"a.b": 1}}`, in: `{"_id": 1, "a": 5}`, code: mongoerr.PathNotViable, msg: "Cannot use the part (b) of (a.b) to traverse the element ({a: 5})"},
		"pop not array":      {update: `{"$pop": {"a": 1}}`, in: `{"_id": 1, "a": 1}`, code: mongoerr.TypeMismatch},
		"pull not array":     {update: `{"$pull": {"a": 1}}`, in: `{"_id": 1, "a": 1}`, code: mongoerr.BadValue},
		"pullAll not array":  {update: `{"$pullAll": {"a": 1}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"rename not string":  {update: `{"$rename": {"a": 1}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"rename same":        {update: `{"$rename": {"a": "a"}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"rename prefix":      {update: `{"$rename": {"a": "a.b"}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"rename from array":  {update: `{"$rename": {"a.b": "c"}}`, in: `{"_id": 1, "a": [{"b": 1}]}`, code: mongoerr.BadValue, msg: "The source field cannot be an array element, 'a.b' in doc with _id: 1 has an array field called 'a'"},
		"rename to array":    {update: `{"$rename": {"c": "a.b"}}`, in: `{"_id": 1, "a": [{"b": 1}], "c": 1}`, code: mongoerr.BadValue, msg: "The destination field cannot be an array element, 'a.b' in doc with _id: 1 has an array field called 'a'"},
		"rename id":          {update: `{"$rename": {"_id": "x"}}`, in: `{"_id": 1}`, code: mongoerr.ImmutableField, msg: "Unsetting the path '_id' using $rename would modify the immutable field '_id'"},
		"rename scalar":      {update: `{"$rename": {"a.b": "c"}}`, in: `{"_id": 1, "a": 5}`, code: mongoerr.PathNotViable},
		"currentDate bad":    {update: `{"$currentDate": {"a": {"$type": "x"}}}`, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"positional no idx":  {update: `{"$set": {"a.$": 1}}`, in: `{"_id": 1, "a": [1]}`, code: mongoerr.BadValue, msg: "The positional operator did not find the match needed from the query."},
		"no array filter":    {update: `{"$set": {"a.$[x]": 1}}`, in: `{"_id": 1, "a": [1]}`, code: mongoerr.BadValue, msg: "No array filter found for identifier 'x' in path 'a.$[x]'"},
		"unused filter":      {update: `{"$set": {"a": 1}}`, filters: []string{`{"x": 1}`}, in: `{"_id": 1}`, code: mongoerr.FailedToParse},
		"bad identifier":     {update: `{"$set": {"a.$[X]": 1}}`, filters: []string{`{"X": 1}`}, in: `{"_id": 1}`, code: mongoerr.BadValue},
		"dup identifier":     {update: `{"$set": {"a.$[x]": 1}}`, filters: []string{`{"x": 1}`, `{"x": 2}`}, in: `{"_id": 1}`, code: mongoerr.FailedToParse},
		"all pos non-array":  {update: `{"$set": {"a.$[]": 1}}`, in: `{"_id": 1, "a": 1}`, code: mongoerr.BadValue},
		"pipeline bad stage": {update: `[{"$match": {}}]`, in: `{"_id": 1}`, code: mongoerr.InvalidOptions},
		"update not doc":     {update: `1`, in: `{"_id": 1}`, code: mongoerr.FailedToParse},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := applyUpdate(t, []string{tc.update}, tc.filters, tc.in, ApplyOptions{PositionalIndex: -1, Upsert: tc.upsert})
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}
