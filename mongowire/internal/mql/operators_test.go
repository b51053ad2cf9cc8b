package mql

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

func opNames[T namedOp](table []T) []string {
	names := make([]string, len(table))
	for i, op := range table {
		names[i] = op.opName()
	}
	return names
}

// TestOperatorTablesSorted checks every table: sorted by name (lookups
// are binary searches), no name twice, every name an operator name.
func TestOperatorTablesSorted(t *testing.T) {
	tables := map[string][]string{
		"exprOperators":     opNames(exprOperators),
		"topLevelOperators": opNames(topLevelOperators),
		"fieldOperators":    opNames(fieldOperators),
		"updateOperators":   opNames(updateOperators),
		"accumulators":      opNames(accumulators),
		"pipelineStages":    opNames(pipelineStages),
	}
	for name, names := range tables {
		t.Run(name, func(t *testing.T) {
			if len(names) == 0 {
				t.Fatal("empty table")
			}
			for i, n := range names {
				if !strings.HasPrefix(n, "$") || len(n) < 2 {
					t.Errorf("entry %d: %q is not an operator name", i, n)
				}
				if i > 0 && strings.Compare(names[i-1], n) >= 0 {
					t.Errorf("entry %d: %q after %q: not sorted or a duplicate", i, n, names[i-1])
				}
			}
			for _, n := range names {
				if _, ok := slices.BinarySearch(names, n); !ok {
					t.Errorf("%q not found by binary search", n)
				}
			}
		})
	}
}

// checkExamples requires exactly one example per table entry.
func checkExamples(t *testing.T, table []string, examples map[string]string) {
	t.Helper()
	for _, n := range table {
		if _, ok := examples[n]; !ok {
			t.Errorf("%s: no example use in this test; add one", n)
		}
	}
	for n := range examples {
		if !slices.Contains(table, n) {
			t.Errorf("%s: example of an operator the table does not have", n)
		}
	}
}

// exprExamples are minimal uses of the expression operators with their
// own compiler; the others take a list of arity arguments.
var exprExamples = map[string]string{
	"$and":          `[true, false]`,
	"$cond":         `[true, 1, 2]`,
	"$convert":      `{"input": 1, "to": "string"}`,
	"$dateAdd":      `{"startDate": "$d", "unit": "day", "amount": 1}`,
	"$dateDiff":     `{"startDate": "$d", "endDate": "$d", "unit": "day"}`,
	"$dateSubtract": `{"startDate": "$d", "unit": "day", "amount": 1}`,
	"$dateToString": `{"date": "$d", "format": "%Y"}`,
	"$dateTrunc":    `{"date": "$d", "unit": "day"}`,
	"$filter":       `{"input": [1], "as": "v", "cond": true}`,
	"$firstN":       `{"n": 1, "input": [1]}`,
	"$getField":     `"a"`,
	"$ifNull":       `["$a", 0]`,
	"$lastN":        `{"n": 1, "input": [1]}`,
	"$let":          `{"vars": {"x": 1}, "in": "$$x"}`,
	"$literal":      `"$notAPath"`,
	"$ltrim":        `{"input": " a"}`,
	"$map":          `{"input": [1], "as": "v", "in": "$$v"}`,
	"$maxN":         `{"n": 1, "input": [1]}`,
	"$minN":         `{"n": 1, "input": [1]}`,
	"$or":           `[true]`,
	"$reduce":       `{"input": [1], "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}`,
	"$regexFind":    `{"input": "a", "regex": "a"}`,
	"$regexFindAll": `{"input": "a", "regex": "a"}`,
	"$regexMatch":   `{"input": "a", "regex": "a"}`,
	"$replaceAll":   `{"input": "a", "find": "a", "replacement": "b"}`,
	"$replaceOne":   `{"input": "a", "find": "a", "replacement": "b"}`,
	"$rtrim":        `{"input": "a "}`,
	"$setField":     `{"field": "a", "input": {}, "value": 1}`,
	"$sortArray":    `{"input": [2, 1], "sortBy": 1}`,
	"$switch":       `{"branches": [{"case": true, "then": 1}], "default": 0}`,
	"$trim":         `{"input": " a "}`,
	"$unsetField":   `{"field": "a", "input": {}}`,
	"$zip":          `{"inputs": [[1], [2]]}`,
	// The date parts.
	"$dayOfMonth": `"$d"`, "$dayOfWeek": `"$d"`, "$dayOfYear": `"$d"`, "$hour": `"$d"`,
	"$isoDayOfWeek": `"$d"`, "$isoWeek": `"$d"`, "$isoWeekYear": `"$d"`, "$millisecond": `"$d"`,
	"$minute": `"$d"`, "$month": `"$d"`, "$second": `"$d"`, "$week": `"$d"`, "$year": `"$d"`,
}

// TestExprOperatorsReachable compiles a minimal use of every expression
// operator in the table, and evaluates it on a document.
func TestExprOperatorsReachable(t *testing.T) {
	var own []string
	for _, op := range exprOperators {
		if op.compile != nil {
			own = append(own, op.name)
		}
		if op.compile == nil && op.eval == nil {
			t.Errorf("%s: neither compile nor eval", op.name)
		}
	}
	checkExamples(t, own, exprExamples)
	in := doc(t, `{"a": 1, "d": {"$date": "2024-05-06T07:08:09Z"}}`)
	for _, op := range exprOperators {
		arg, ok := exprExamples[op.name]
		if !ok {
			args := []string{}
			for range max(op.arity, 1) {
				args = append(args, "1")
			}
			arg = "[" + strings.Join(args, ", ") + "]"
		}
		t.Run(op.name, func(t *testing.T) {
			e, err := CompileExpr(val(t, fmt.Sprintf(`{%q: %s}`, op.name, arg)))
			if err != nil {
				t.Fatalf("compile {%s: %s}: %v", op.name, arg, err)
			}
			if op.compile != nil { // evaluators may refuse the number 1; compilers got a valid use
				if _, err := e.Eval(in); err != nil {
					t.Errorf("eval {%s: %s}: %v", op.name, arg, err)
				}
			}
		})
	}
	_, err := CompileExpr(val(t, `{"$noSuchOperator": 1}`))
	wantCode(t, err, mongoerr.InvalidPipelineOperator, "Unrecognized expression '$noSuchOperator'")
}

// TestQueryOperatorsReachable parses a minimal use of every query
// operator; the ones MongoDB has and this package does not are refused
// as such, not as unknown.
func TestQueryOperatorsReachable(t *testing.T) {
	top := map[string]string{
		"$alwaysFalse": `1`, "$alwaysTrue": `1`, "$and": `[{"a": 1}]`, "$comment": `"c"`,
		"$db": `"d"`, "$expr": `true`, "$id": `1`, "$jsonSchema": `{}`, "$nor": `[{"a": 1}]`,
		"$or": `[{"a": 1}]`, "$ref": `"c"`, "$sampleRate": `0.5`, "$text": `{"$search": "x"}`,
		"$where": `"true"`,
	}
	refusedTop := map[string]string{
		"$sampleRate": "not supported by this server",
		"$where":      "not supported by this server", "$text": "text index required",
	}
	checkExamples(t, opNames(topLevelOperators), top)
	for name, arg := range top {
		t.Run(name, func(t *testing.T) {
			_, err := CompileFilter(doc(t, fmt.Sprintf(`{%q: %s}`, name, arg)))
			checkParsed(t, err, refusedTop[name])
		})
	}

	field := map[string]string{
		"$all": `[1]`, "$comment": `"c"`, "$elemMatch": `{"$gt": 1}`, "$eq": `1`, "$exists": `true`,
		"$gt": `1`, "$gte": `1`, "$in": `[1]`, "$lt": `1`, "$lte": `1`, "$mod": `[2, 0]`, "$ne": `1`,
		"$nin": `[1]`, "$not": `{"$gt": 1}`, "$regex": `"a"`, "$size": `1`, "$type": `"int"`,
		"$where": `"true"`,
		// Refused.
		"$bitsAllClear": `1`, "$bitsAllSet": `1`, "$bitsAnyClear": `1`, "$bitsAnySet": `1`,
		"$geoIntersects": `{}`, "$geoWithin": `{}`, "$jsonSchema": `{}`, "$near": `{}`,
		"$nearSphere": `{}`, "$text": `{}`,
		// $options goes with $regex.
		"$options": `"i", "$regex": "a"`,
	}
	checkExamples(t, opNames(fieldOperators), field)
	for name, arg := range field {
		t.Run("field "+name, func(t *testing.T) {
			_, err := CompileFilter(doc(t, fmt.Sprintf(`{"a": {%q: %s}}`, name, arg)))
			refused := ""
			if op, _ := lookupOperator(fieldOperators, name); op.parse != nil && funcName(op.parse) == funcName(refuseField) {
				refused = "not supported by this server"
			}
			if name == "$where" {
				refused = "cannot be applied to a field"
			}
			checkParsed(t, err, refused)
		})
	}
}

// checkParsed requires no error, or the refusal wanted.
func checkParsed(t *testing.T, err error, refusal string) {
	t.Helper()
	switch {
	case refusal == "" && err != nil:
		t.Errorf("got %v, want no error", err)
	case refusal != "" && (err == nil || !strings.Contains(err.Error(), refusal)):
		t.Errorf("got %v, want an error with %q", err, refusal)
	}
}

func funcName(f any) string { return fmt.Sprintf("%p", f) }

// TestUpdateOperatorsReachable compiles a minimal use of every update
// operator.
func TestUpdateOperatorsReachable(t *testing.T) {
	examples := map[string]string{
		"$addToSet": `{"a": 1}`, "$bit": `{"a": {"and": 1}}`, "$currentDate": `{"a": true}`,
		"$inc": `{"a": 1}`, "$max": `{"a": 1}`, "$min": `{"a": 1}`, "$mul": `{"a": 2}`,
		"$pop": `{"a": 1}`, "$pull": `{"a": 1}`, "$pullAll": `{"a": [1]}`, "$push": `{"a": 1}`,
		"$rename": `{"a": "b"}`, "$set": `{"a": 1}`, "$setOnInsert": `{"a": 1}`, "$unset": `{"a": ""}`,
	}
	checkExamples(t, opNames(updateOperators), examples)
	for name, arg := range examples {
		t.Run(name, func(t *testing.T) {
			if _, err := CompileUpdate(val(t, fmt.Sprintf(`{%q: %s}`, name, arg)), nil); err != nil {
				t.Errorf("compile {%s: %s}: %v", name, arg, err)
			}
		})
	}
	_, err := CompileUpdate(val(t, `{"$noSuch": {"a": 1}}`), nil)
	wantCode(t, err, mongoerr.FailedToParse, "Unknown modifier: $noSuch. Expected a valid update modifier or pipeline-style update specified as an array")
}

// TestAccumulatorsReachable runs a $group with every accumulator.
func TestAccumulatorsReachable(t *testing.T) {
	examples := map[string]string{
		"$addToSet": `"$a"`, "$avg": `"$a"`, "$count": `{}`, "$first": `"$a"`, "$last": `"$a"`,
		"$max": `"$a"`, "$mergeObjects": `"$o"`, "$min": `"$a"`, "$push": `"$a"`,
		"$stdDevPop": `"$a"`, "$stdDevSamp": `"$a"`, "$sum": `"$a"`,
		"$firstN": `{"n": 1, "input": "$a"}`, "$lastN": `{"n": 1, "input": "$a"}`,
		"$maxN": `{"n": 1, "input": "$a"}`, "$minN": `{"n": 1, "input": "$a"}`,
		"$top": `{"sortBy": {"a": 1}, "output": "$a"}`, "$bottom": `{"sortBy": {"a": 1}, "output": "$a"}`,
		"$topN":    `{"n": 1, "sortBy": {"a": 1}, "output": "$a"}`,
		"$bottomN": `{"n": 1, "sortBy": {"a": 1}, "output": "$a"}`,
	}
	checkExamples(t, opNames(accumulators), examples)
	for name, arg := range examples {
		t.Run(name, func(t *testing.T) {
			p, err := CompilePipeline(docs(t, fmt.Sprintf(`{"$group": {"_id": null, "x": {%q: %s}}}`, name, arg)))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			out, err := p.Run(nil, docs(t, `{"a": 1, "o": {"k": 1}}`, `{"a": 2, "o": {"j": 2}}`))
			if err != nil || len(out) != 1 {
				t.Errorf("run: %d documents, %v; want 1 and no error", len(out), err)
			}
		})
	}
	_, err := CompilePipeline(docs(t, `{"$group": {"_id": null, "x": {"$noSuch": 1}}}`))
	wantCode(t, err, 15952, "unknown group operator '$noSuch'")
}

// TestStagesReachable compiles a minimal use of every stage; the stages
// not run here are refused as unsupported (115), and only the update
// stages are allowed in an update pipeline.
func TestStagesReachable(t *testing.T) {
	examples := map[string]string{
		"$addFields": `{"b": 1}`, "$bucket": `{"groupBy": "$a", "boundaries": [0, 10], "default": "other"}`,
		"$bucketAuto": `{"groupBy": "$a", "buckets": 2}`, "$count": `"n"`, "$facet": `{"f": [{"$match": {}}]}`,
		"$group": `{"_id": null}`, "$limit": `1`, "$lookup": `{"from": "c", "localField": "a", "foreignField": "b", "as": "j"}`,
		"$match": `{}`, "$project": `{"a": 1}`, "$replaceRoot": `{"newRoot": "$$ROOT"}`, "$replaceWith": `"$$ROOT"`,
		"$sample": `{"size": 1}`, "$set": `{"b": 1}`, "$skip": `0`, "$sort": `{"a": 1}`, "$sortByCount": `"$a"`,
		"$unionWith": `"c"`, "$unset": `"a"`, "$unwind": `"$a"`,
		"$setWindowFields": `{"output": {"n": {"$count": {}}}}`,
		"$graphLookup":     `{"from": "c", "startWith": "$a", "connectFromField": "a", "connectToField": "b", "as": "g"}`,
	}
	for _, op := range pipelineStages {
		if op.compile == nil {
			examples[op.name] = `{}`
		}
	}
	checkExamples(t, opNames(pipelineStages), examples)
	for _, op := range pipelineStages {
		t.Run(op.name, func(t *testing.T) {
			st := fmt.Sprintf(`{%q: %s}`, op.name, examples[op.name])
			_, err := CompilePipeline(docs(t, st))
			if op.compile == nil {
				wantCode(t, err, mongoerr.CommandNotSupported, op.name+" is not supported by this server")
				return
			}
			if err != nil {
				t.Fatalf("compile [%s]: %v", st, err)
			}
			_, err = CompileUpdate(val(t, "["+st+"]"), nil)
			if op.update && err != nil {
				t.Errorf("update pipeline [%s]: %v", st, err)
			}
			if !op.update {
				wantCode(t, err, mongoerr.InvalidOptions, op.name+" is not allowed to be used within an update")
			}
		})
	}
	_, err := CompilePipeline(docs(t, `{"$noSuch": {}}`))
	wantCode(t, err, mongoerr.Location40324, "Unrecognized pipeline stage name: '$noSuch'")
}
