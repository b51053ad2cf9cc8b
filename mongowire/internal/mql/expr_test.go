package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func TestExprEval(t *testing.T) {
	t.Parallel()
	root := `{"_id": 1, "a": 5, "b": 2, "s": "Hello", "arr": [1, 2, 3], "docs": [{"x": 1}, {"x": 2}, {"y": 3}], "n": null, "d": {"$date": "2020-01-01T00:00:00Z"}, "l": {"$numberLong": "7"}, "f": 2.5}`
	tests := map[string]struct {
		expr string
		want string // extended JSON of the value; "missing" for none
	}{
		"field":               {`"$a"`, `5`},
		"dotted array":        {`"$docs.x"`, `[1, 2]`},
		"missing":             {`"$zz"`, `missing`},
		"root":                {`"$$ROOT.a"`, `5`},
		"literal string":      {`"abc"`, `"abc"`},
		"literal op":          {`{"$literal": "$a"}`, `"$a"`},
		"object":              {`{"x": "$a", "y": "$zz"}`, `{"x": 5}`},
		"array":               {`["$a", "$zz"]`, `[5, null]`},
		"add":                 {`{"$add": ["$a", "$b", 1]}`, `8`},
		"add long":            {`{"$add": ["$a", "$l"]}`, `{"$numberLong": "12"}`},
		"add double":          {`{"$add": ["$a", "$f"]}`, `7.5`},
		"add null":            {`{"$add": ["$a", "$n"]}`, `null`},
		"add missing":         {`{"$add": ["$a", "$zz"]}`, `null`},
		"add date":            {`{"$add": ["$d", 1000]}`, `{"$date": "2020-01-01T00:00:01Z"}`},
		"add overflow":        {`{"$add": [2147483647, 1]}`, `{"$numberLong": "2147483648"}`},
		"subtract":            {`{"$subtract": ["$a", "$b"]}`, `3`},
		"subtract dates":      {`{"$subtract": ["$d", "$d"]}`, `{"$numberLong": "0"}`},
		"multiply":            {`{"$multiply": ["$a", "$b"]}`, `10`},
		"divide":              {`{"$divide": ["$a", "$b"]}`, `2.5`},
		"divide exact":        {`{"$divide": [4, 2]}`, `2.0`},
		"mod":                 {`{"$mod": ["$a", "$b"]}`, `1`},
		"mod double":          {`{"$mod": [5.5, 2]}`, `1.5`},
		"abs":                 {`{"$abs": -3}`, `3`},
		"concat":              {`{"$concat": ["$s", " ", "w"]}`, `"Hello w"`},
		"concat null":         {`{"$concat": ["$s", "$n"]}`, `null`},
		"toLower":             {`{"$toLower": "$s"}`, `"hello"`},
		"toUpper":             {`{"$toUpper": "$s"}`, `"HELLO"`},
		"toUpper null":        {`{"$toUpper": "$n"}`, `""`},
		"cond array":          {`{"$cond": [{"$gt": ["$a", 3]}, "big", "small"]}`, `"big"`},
		"cond doc":            {`{"$cond": {"if": {"$lt": ["$a", 3]}, "then": "small", "else": "big"}}`, `"big"`},
		"ifNull":              {`{"$ifNull": ["$zz", "$n", "dflt"]}`, `"dflt"`},
		"ifNull present":      {`{"$ifNull": ["$a", "dflt"]}`, `5`},
		"eq":                  {`{"$eq": ["$a", 5.0]}`, `true`},
		"eq missing null":     {`{"$eq": ["$zz", null]}`, `false`},
		"ne":                  {`{"$ne": ["$a", 5]}`, `false`},
		"gt types":            {`{"$gt": ["$s", "$a"]}`, `true`},
		"lte":                 {`{"$lte": ["$b", 2]}`, `true`},
		"cmp":                 {`{"$cmp": ["$a", "$b"]}`, `1`},
		"and":                 {`{"$and": [true, "$a"]}`, `true`},
		"and falsy":           {`{"$and": [true, 0]}`, `false`},
		"or":                  {`{"$or": [false, "$n", "$arr"]}`, `true`},
		"not":                 {`{"$not": ["$n"]}`, `true`},
		"in":                  {`{"$in": [2, "$arr"]}`, `true`},
		"in no":               {`{"$in": [9, "$arr"]}`, `false`},
		"size":                {`{"$size": "$arr"}`, `3`},
		"arrayElemAt":         {`{"$arrayElemAt": ["$arr", 1]}`, `2`},
		"arrayElemAt neg":     {`{"$arrayElemAt": ["$arr", -1]}`, `3`},
		"arrayElemAt out":     {`{"$arrayElemAt": ["$arr", 9]}`, `missing`},
		"toString int":        {`{"$toString": "$a"}`, `"5"`},
		"toString double":     {`{"$toString": "$f"}`, `"2.5"`},
		"toString date":       {`{"$toString": "$d"}`, `"2020-01-01T00:00:00.000Z"`},
		"toString null":       {`{"$toString": "$n"}`, `null`},
		"toInt":               {`{"$toInt": "42"}`, `42`},
		"toInt double":        {`{"$toInt": 2.9}`, `2`},
		"toInt bool":          {`{"$toInt": true}`, `1`},
		"toDouble":            {`{"$toDouble": "1.5"}`, `1.5`},
		"toDouble int":        {`{"$toDouble": "$a"}`, `5.0`},
		"toLong":              {`{"$toLong": "$a"}`, `{"$numberLong": "5"}`},
		"type":                {`{"$type": "$s"}`, `"string"`},
		"type missing":        {`{"$type": "$zz"}`, `"missing"`},
		"type long":           {`{"$type": "$l"}`, `"long"`},
		"sum array":           {`{"$sum": "$arr"}`, `6`},
		"sum args":            {`{"$sum": [1, "x", 2]}`, `3`},
		"avg":                 {`{"$avg": "$arr"}`, `2.0`},
		"max":                 {`{"$max": "$arr"}`, `3`},
		"min":                 {`{"$min": [3, "$n", 1]}`, `1`},
		"let":                 {`{"$let": {"vars": {"x": "$a"}, "in": {"$add": ["$$x", 1]}}}`, `6`},
		"map":                 {`{"$map": {"input": "$arr", "as": "e", "in": {"$multiply": ["$$e", 2]}}}`, `[2, 4, 6]`},
		"filter":              {`{"$filter": {"input": "$arr", "cond": {"$gt": ["$$this", 1]}}}`, `[2, 3]`},
		"concatArrays":        {`{"$concatArrays": ["$arr", [4]]}`, `[1, 2, 3, 4]`},
		"isArray":             {`{"$isArray": ["$arr"]}`, `true`},
		"decimal add":         {`{"$add": [{"$numberDecimal": "0.1"}, {"$numberDecimal": "0.2"}]}`, `{"$numberDecimal": "0.3"}`},
		"divide decimal":      {`{"$divide": [{"$numberDecimal": "1"}, 4]}`, `{"$numberDecimal": "0.25"}`},
		"nested object paths": {`{"o": {"p": "$docs.y"}}`, `{"o": {"p": [3]}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if err != nil {
				t.Fatalf("compile %s: %v", tc.expr, err)
			}
			got, err := e.Eval(doc(t, root))
			if err != nil {
				t.Fatalf("eval %s: %v", tc.expr, err)
			}
			if tc.want == "missing" {
				if got.Type != 0 {
					t.Fatalf("got %s, want missing", got)
				}
				return
			}
			want := val(t, tc.want)
			if got.Type != want.Type || !Equal(got, want) {
				t.Fatalf("%s = %s (%s), want %s (%s)", tc.expr, got, got.Type, want, want.Type)
			}
		})
	}
}

func TestExprErrors(t *testing.T) {
	t.Parallel()
	root := `{"a": 5, "s": "x", "arr": [1]}`
	tests := map[string]struct {
		expr    string
		code    int32
		msg     string
		compile bool
	}{
		"unknown":         {`{"$foo": 1}`, mongoerr.InvalidPipelineOperator, "Unrecognized expression '$foo'", true},
		"two fields":      {`{"$add": [1], "$sub": 1}`, 15983, "", true},
		"arity":           {`{"$subtract": [1]}`, 16020, "Expression $subtract takes exactly 2 arguments. 1 were passed in.", true},
		"undefined var":   {`"$$nope"`, mongoerr.Location17276, "Use of undefined variable: nope", true},
		"empty path":      {`"$a..b"`, mongoerr.Location15998, "", true},
		"add string":      {`{"$add": ["$a", "$s"]}`, 16554, "$add only supports numeric or date types, not string", false},
		"divide zero":     {`{"$divide": ["$a", 0]}`, mongoerr.BadValue, "can't $divide by zero", false},
		"mod zero":        {`{"$mod": ["$a", 0]}`, 16610, "can't $mod by zero", false},
		"multiply string": {`{"$multiply": ["$s", 2]}`, 16555, "", false},
		"concat number":   {`{"$concat": ["$s", 1]}`, 16702, "$concat only supports strings, not int", false},
		"size non-array":  {`{"$size": "$a"}`, 17124, "The argument to $size must be an array. Type of argument is: int", false},
		"in non-array":    {`{"$in": [1, "$a"]}`, 40081, "", false},
		"toInt bad":       {`{"$toInt": "$s"}`, mongoerr.ConversionFailure, "", false},
		"toInt overflow":  {`{"$toInt": 3000000000.0}`, mongoerr.ConversionFailure, "", false},
		"arrayElemAt bad": {`{"$arrayElemAt": ["$a", 0]}`, 28689, "", false},
		"cond missing":    {`{"$cond": {"if": true, "then": 1}}`, 17082, "", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if tc.compile {
				wantCode(t, err, tc.code, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			_, err = e.Eval(doc(t, root))
			wantCode(t, err, tc.code, tc.msg)
		})
	}
}

func TestFieldOperators(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"_id": 1, "a.b": 2, "$c": 3, "o": {"x": 1}}`)
	tests := map[string]struct{ expr, want string }{
		"getField dotted": {`{"$getField": "a.b"}`, `2`},
		"getField dollar": {`{"$getField": {"field": {"$literal": "$c"}, "input": "$$ROOT"}}`, `3`},
		"setField":        {`{"$setField": {"field": "y", "input": "$o", "value": 2}}`, `{"x": 1, "y": 2}`},
		"setField dollar": {`{"$setField": {"field": {"$literal": "$d"}, "input": "$o", "value": 2}}`, `{"x": 1, "$d": 2}`},
		"setField remove": {`{"$setField": {"field": "x", "input": "$o", "value": "$$REMOVE"}}`, `{}`},
		"unsetField":      {`{"$unsetField": {"field": "x", "input": "$o"}}`, `{}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			if want := val(t, tc.want); !Equal(got, want) {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

func TestBindLet(t *testing.T) {
	t.Parallel()
	let := doc(t, `{"id": 2, "o": {"k": "v"}, "sum": {"$add": [1, "$$id"]}}`)
	f, err := BindLet(val(t, `{"$expr": {"$and": [{"$eq": ["$_id", "$$id"]}, {"$eq": ["$k", "$$o.k"]}, {"$eq": ["$s", "$$sum"]}]}}`), let)
	if err != nil {
		t.Fatal(err)
	}
	flt, err := CompileFilter(f.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !flt.Match(doc(t, `{"_id": 2, "k": "v", "s": 3}`)) || flt.Match(doc(t, `{"_id": 1, "k": "v", "s": 3}`)) {
		t.Fatal("let variables not bound")
	}
	lit, err := BindLet(val(t, `{"$literal": "$$id"}`), let)
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(lit.Value, "$literal"); str(got) != "$$id" {
		t.Fatalf("$literal changed: %s", lit)
	}
	_, err = BindLet(val(t, `{}`), doc(t, `{"Bad": 1}`))
	wantCode(t, err, 16867, "")
}

func TestMoreExpressions(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"f": 2.5, "n": -3, "s": "héllo world", "arr": [1, 2, 3, 4], "o": {"a": 1}, "p": {"b": 2, "a": 3}, "d": {"$date": "2021-03-04T05:06:07.089Z"}}`)
	tests := map[string]struct{ expr, want string }{
		"floor":           {`{"$floor": "$f"}`, `2.0`},
		"ceil":            {`{"$ceil": "$f"}`, `3.0`},
		"floor int":       {`{"$floor": "$n"}`, `-3`},
		"sqrt":            {`{"$sqrt": 16}`, `4.0`},
		"pow int":         {`{"$pow": [2, 10]}`, `1024`},
		"pow double":      {`{"$pow": [4, 0.5]}`, `2.0`},
		"round":           {`{"$round": ["$f", 0]}`, `2.0`},
		"round place":     {`{"$round": [3.14159, 2]}`, `3.14`},
		"trunc":           {`{"$trunc": [-2.7]}`, `-2.0`},
		"substr":          {`{"$substrBytes": ["$s", 0, 1]}`, `"h"`},
		"substrCP":        {`{"$substrCP": ["$s", 1, 4]}`, `"éllo"`},
		"split":           {`{"$split": ["$s", " "]}`, `["héllo", "world"]`},
		"strcasecmp":      {`{"$strcasecmp": ["ABC", "abc"]}`, `0`},
		"slice":           {`{"$slice": ["$arr", 2]}`, `[1, 2]`},
		"slice neg":       {`{"$slice": ["$arr", -1]}`, `[4]`},
		"slice skip":      {`{"$slice": ["$arr", 1, 2]}`, `[2, 3]`},
		"reverse":         {`{"$reverseArray": "$arr"}`, `[4, 3, 2, 1]`},
		"range":           {`{"$range": [0, 6, 2]}`, `[0, 2, 4]`},
		"indexOfArray":    {`{"$indexOfArray": ["$arr", 3]}`, `2`},
		"mergeObjects":    {`{"$mergeObjects": ["$o", "$p"]}`, `{"a": 3, "b": 2}`},
		"objectToArray":   {`{"$objectToArray": "$o"}`, `[{"k": "a", "v": 1}]`},
		"arrayToObject":   {`{"$arrayToObject": [[["x", 1], ["y", 2]]]}`, `{"x": 1, "y": 2}`},
		"year":            {`{"$year": "$d"}`, `2021`},
		"month":           {`{"$month": "$d"}`, `3`},
		"dayOfMonth":      {`{"$dayOfMonth": "$d"}`, `4`},
		"millisecond":     {`{"$millisecond": "$d"}`, `89`},
		"dayOfWeek":       {`{"$dayOfWeek": "$d"}`, `5`},
		"floor null":      {`{"$floor": "$missing"}`, `null`},
		"mergeObjects 1":  {`{"$mergeObjects": ["$o", null]}`, `{"a": 1}`},
		"setUnion":        {`{"$setUnion": [[1, 2], [2.0, 3]]}`, `[1, 2, 3]`},
		"setIntersect":    {`{"$setIntersection": ["$arr", [4, 2, 9]]}`, `[2, 4]`},
		"setDifference":   {`{"$setDifference": ["$arr", [1, 2]]}`, `[3, 4]`},
		"setEquals":       {`{"$setEquals": [[1, 2, 2], [2, 1]]}`, `true`},
		"setIsSubset":     {`{"$setIsSubset": [[1], "$arr"]}`, `true`},
		"anyElementTrue":  {`{"$anyElementTrue": [[0, null, 1]]}`, `true`},
		"allElementsTrue": {`{"$allElementsTrue": [[1, 0]]}`, `false`},
		"isNumber":        {`{"$isNumber": "$f"}`, `true`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			want := val(t, tc.want)
			if got.Type != want.Type || !Equal(got, want) {
				t.Fatalf("%s = %s (%s), want %s (%s)", tc.expr, got, got.Type, want, want.Type)
			}
		})
	}
	e, err := CompileExpr(val(t, `{"$sqrt": -1}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(root)
	wantCode(t, err, 28714, "")
}

func TestDateToString(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"d": {"$date": "2021-03-04T05:06:07.089Z"}}`)
	tests := map[string]struct{ expr, want string }{
		"default":  {`{"$dateToString": {"date": "$d"}}`, `"2021-03-04T05:06:07.089Z"`},
		"format":   {`{"$dateToString": {"date": "$d", "format": "%Y/%m/%d %H:%M:%S.%L %j %%"}}`, `"2021/03/04 05:06:07.089 063 %"`},
		"offset":   {`{"$dateToString": {"date": "$d", "format": "%H:%M %z", "timezone": "+01:30"}}`, `"06:36 +0130"`},
		"on null":  {`{"$dateToString": {"date": "$missing", "onNull": "none"}}`, `"none"`},
		"null":     {`{"$dateToString": {"date": "$missing"}}`, `null`},
		"week day": {`{"$dateToString": {"date": "$d", "format": "%w %u"}}`, `"5 4"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			if want := val(t, tc.want); got.Type != want.Type || !Equal(got, want) {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	e, err := CompileExpr(val(t, `{"$dateToString": {"date": "$d", "format": "%Q"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(root)
	wantCode(t, err, 18536, "")
}

func TestRandAndLetLikeTheCRUDSpec(t *testing.T) {
	t.Parallel()
	// aggregate-let.json: let {id: 1, x: "foo", y: {$literal: "$bar"}, rand: {$rand: {}}}
	let := doc(t, `{"id": 1, "x": "foo", "y": {"$literal": "$bar"}, "rand": {"$rand": {}}}`)
	bound, err := BindLet(val(t, `[{"$match": {"$expr": {"$eq": ["$_id", "$$id"]}}}, {"$project": {"_id": 0, "x": "$$x", "y": "$$y", "rand": "$$rand"}}]`), let)
	if err != nil {
		t.Fatal(err)
	}
	var st []bson.Raw
	for _, s := range arrayValues(bound.Value) {
		st = append(st, s.Value)
	}
	p, err := CompilePipeline(st)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(nil, docs(t, `{"_id": 1}`, `{"_id": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || str(lookup(out[0], "x")) != "foo" || str(lookup(out[0], "y")) != "$bar" || lookup(out[0], "rand").Type != bson.TypeDouble {
		t.Fatalf("got %v", out)
	}
}

func TestNamedArgumentExpressions(t *testing.T) {
	t.Parallel()
	root := doc(t, `{"s": "  hi there  ", "n": "12", "bad": "x", "arr": [1, 2, 3], "v": 7}`)
	tests := map[string]struct{ expr, want string }{
		"convert":          {`{"$convert": {"input": "$n", "to": "int"}}`, `12`},
		"convert code":     {`{"$convert": {"input": "$n", "to": 1}}`, `12.0`},
		"convert onError":  {`{"$convert": {"input": "$bad", "to": "int", "onError": -1}}`, `-1`},
		"convert onNull":   {`{"$convert": {"input": "$missing", "to": "int", "onNull": 0}}`, `0`},
		"switch":           {`{"$switch": {"branches": [{"case": {"$lt": ["$v", 5]}, "then": "low"}, {"case": {"$lt": ["$v", 10]}, "then": "mid"}], "default": "high"}}`, `"mid"`},
		"switch default":   {`{"$switch": {"branches": [{"case": false, "then": 1}], "default": 2}}`, `2`},
		"reduce":           {`{"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}`, `6`},
		"regexMatch":       {`{"$regexMatch": {"input": "$s", "regex": "HI", "options": "i"}}`, `true`},
		"regexFind":        {`{"$regexFind": {"input": "$s", "regex": "(t)here"}}`, `{"match": "there", "idx": 5, "captures": ["t"]}`},
		"regexFindAll":     {`{"$size": {"$regexFindAll": {"input": "$s", "regex": "e"}}}`, `2`},
		"trim":             {`{"$trim": {"input": "$s"}}`, `"hi there"`},
		"ltrim chars":      {`{"$ltrim": {"input": "xxhix", "chars": "x"}}`, `"hix"`},
		"regexMatch null":  {`{"$regexMatch": {"input": "$missing", "regex": "a"}}`, `false`},
		"convert to bool":  {`{"$convert": {"input": 0, "to": "bool"}}`, `false`},
		"convert to long":  {`{"$convert": {"input": "$v", "to": "long"}}`, `{"$numberLong": "7"}`},
		"convert null arg": {`{"$convert": {"input": "$v", "to": null}}`, `null`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := CompileExpr(val(t, tc.expr))
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(root)
			if err != nil {
				t.Fatal(err)
			}
			if want := val(t, tc.want); got.Type != want.Type || !Equal(got, want) {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	e, err := CompileExpr(val(t, `{"$switch": {"branches": [{"case": false, "then": 1}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(root)
	wantCode(t, err, 40066, "")
	_, err = CompileExpr(val(t, `{"$convert": {"input": 1}}`))
	wantCode(t, err, mongoerr.FailedToParse, "Missing 'to' parameter to $convert")
}
