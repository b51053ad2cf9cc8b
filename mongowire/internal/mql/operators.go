package mql

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The operators of the query language, one table per kind, each sorted by
// name: the one place that says what exists and which function handles
// it. A name missing from its table is refused with mongod's error for an
// unknown operator; an operator MongoDB has but this package does not
// implement is in its table with a refusal, so the error says so.
//
// The expression, query and stage tables are filled in init, not by their
// declarations, only because their functions refer back to them (an
// expression compiles its arguments through compileOperator, which reads
// exprOperators), which a package-level initializer may not do.

// namedOp is an entry of one of the tables.
type namedOp interface{ opName() string }

// lookupOperator finds name in table, which is sorted by name.
func lookupOperator[T namedOp](table []T, name string) (T, bool) {
	i, ok := slices.BinarySearchFunc(table, name, func(op T, name string) int { return strings.Compare(op.opName(), name) })
	if !ok {
		var zero T
		return zero, false
	}
	return table[i], true
}

// exprOperator is one aggregation expression operator. Either compile
// parses the argument itself (named arguments, variables, lazy
// evaluation), or the argument is compiled as a list of expressions and
// eval runs over their values, after a check that there are arity of them
// (-1: any number).
type exprOperator struct {
	name    string
	compile func(name string, arg bson.RawValue, vars scope) (expr, error)
	arity   int
	eval    func(name string, args []bson.RawValue) (bson.RawValue, error)
}

func (op exprOperator) opName() string { return op.name }

// exprOperators is every expression operator, sorted by name. Files are
// named by family: expr_arith.go, expr_array.go, expr_cond.go,
// expr_convert.go, expr_date.go, expr_logic.go, expr_object.go,
// expr_set.go, expr_string.go, expr_var.go; accumulate.go and
// accumulate_n.go hold the accumulators' expression forms.
var exprOperators []exprOperator

func init() {
	exprOperators = []exprOperator{
		{name: "$abs", arity: 1, eval: evalAbs},
		{name: "$add", arity: -1, eval: evalAdd},
		{name: "$allElementsTrue", arity: 1, eval: evalElementsTrue},
		{name: "$and", compile: compileAndOr},
		{name: "$anyElementTrue", arity: 1, eval: evalElementsTrue},
		{name: "$arrayElemAt", arity: 2, eval: evalArrayElemAt},
		{name: "$arrayToObject", arity: 1, eval: evalArrayToObject},
		{name: "$avg", arity: -1, eval: evalArrayAccumulator},
		{name: "$ceil", arity: 1, eval: evalRounding},
		{name: "$cmp", arity: 2, eval: evalCmp},
		{name: "$concat", arity: -1, eval: evalConcat},
		{name: "$concatArrays", arity: -1, eval: evalConcatArrays},
		{name: "$cond", compile: unnamed(compileCond)},
		{name: "$convert", compile: unnamed(compileConvert)},
		{name: "$dateAdd", compile: compileDateAdd},
		{name: "$dateDiff", compile: unnamed(compileDateDiff)},
		{name: "$dateSubtract", compile: compileDateAdd},
		{name: "$dateToString", compile: unnamed(compileDateToString)},
		{name: "$dateTrunc", compile: unnamed(compileDateTrunc)},
		{name: "$dayOfMonth", compile: compileDatePart},
		{name: "$dayOfWeek", compile: compileDatePart},
		{name: "$dayOfYear", compile: compileDatePart},
		{name: "$divide", arity: 2, eval: evalDivide},
		{name: "$eq", arity: 2, eval: evalCmp},
		{name: "$exp", arity: 1, eval: evalMath},
		{name: "$filter", compile: compileMapFilter},
		{name: "$first", arity: 1, eval: evalFirstLast},
		{name: "$firstN", compile: compileNExpr},
		{name: "$floor", arity: 1, eval: evalRounding},
		{name: "$getField", compile: compileFieldOp},
		{name: "$gt", arity: 2, eval: evalCmp},
		{name: "$gte", arity: 2, eval: evalCmp},
		{name: "$hour", compile: compileDatePart},
		{name: "$ifNull", compile: unnamed(compileIfNull)},
		{name: "$in", arity: 2, eval: evalIn},
		{name: "$indexOfArray", arity: -1, eval: evalIndexOfArray},
		{name: "$indexOfBytes", arity: -1, eval: evalIndexOf},
		{name: "$indexOfCP", arity: -1, eval: evalIndexOf},
		{name: "$isArray", arity: 1, eval: evalIsArray},
		{name: "$isNumber", arity: 1, eval: evalIsNumber},
		{name: "$isoDayOfWeek", compile: compileDatePart},
		{name: "$isoWeek", compile: compileDatePart},
		{name: "$isoWeekYear", compile: compileDatePart},
		{name: "$last", arity: 1, eval: evalFirstLast},
		{name: "$lastN", compile: compileNExpr},
		{name: "$let", compile: unnamed(compileLet)},
		{name: "$literal", compile: compileLiteral},
		{name: "$ln", arity: 1, eval: evalMath},
		{name: "$log", arity: 2, eval: evalMath},
		{name: "$log10", arity: 1, eval: evalMath},
		{name: "$lt", arity: 2, eval: evalCmp},
		{name: "$lte", arity: 2, eval: evalCmp},
		{name: "$ltrim", compile: compileTrim},
		{name: "$map", compile: compileMapFilter},
		{name: "$max", arity: -1, eval: evalArrayAccumulator},
		{name: "$maxN", compile: compileNExpr},
		{name: "$mergeObjects", arity: -1, eval: evalMergeObjects},
		{name: "$millisecond", compile: compileDatePart},
		{name: "$min", arity: -1, eval: evalArrayAccumulator},
		{name: "$minN", compile: compileNExpr},
		{name: "$minute", compile: compileDatePart},
		{name: "$mod", arity: 2, eval: evalMod},
		{name: "$month", compile: compileDatePart},
		{name: "$multiply", arity: -1, eval: evalMultiply},
		{name: "$ne", arity: 2, eval: evalCmp},
		{name: "$not", arity: 1, eval: evalNot},
		{name: "$objectToArray", arity: 1, eval: evalObjectToArray},
		{name: "$or", compile: compileAndOr},
		{name: "$pow", arity: 2, eval: evalMath},
		{name: "$rand", arity: -1, eval: evalRand},
		{name: "$range", arity: -1, eval: evalRange},
		{name: "$reduce", compile: unnamed(compileReduce)},
		{name: "$regexFind", compile: compileRegexOp},
		{name: "$regexFindAll", compile: compileRegexOp},
		{name: "$regexMatch", compile: compileRegexOp},
		{name: "$replaceAll", compile: compileReplace},
		{name: "$replaceOne", compile: compileReplace},
		{name: "$reverseArray", arity: 1, eval: evalReverseArray},
		{name: "$round", arity: -1, eval: evalRoundPlace},
		{name: "$rtrim", compile: compileTrim},
		{name: "$second", compile: compileDatePart},
		{name: "$setDifference", arity: 2, eval: evalSetOp},
		{name: "$setEquals", arity: -1, eval: evalSetOp},
		{name: "$setField", compile: compileFieldOp},
		{name: "$setIntersection", arity: -1, eval: evalSetOp},
		{name: "$setIsSubset", arity: 2, eval: evalSetOp},
		{name: "$setUnion", arity: -1, eval: evalSetOp},
		{name: "$size", arity: 1, eval: evalSize},
		{name: "$slice", arity: -1, eval: evalSlice},
		{name: "$sortArray", compile: unnamed(compileSortArray)},
		{name: "$split", arity: 2, eval: evalSplit},
		{name: "$sqrt", arity: 1, eval: evalMath},
		{name: "$stdDevPop", arity: -1, eval: evalArrayAccumulator},
		{name: "$stdDevSamp", arity: -1, eval: evalArrayAccumulator},
		{name: "$strLenBytes", arity: 1, eval: evalStrLen},
		{name: "$strLenCP", arity: 1, eval: evalStrLen},
		{name: "$strcasecmp", arity: 2, eval: evalStrcasecmp},
		{name: "$substr", arity: 3, eval: evalSubstr},
		{name: "$substrBytes", arity: 3, eval: evalSubstr},
		{name: "$substrCP", arity: 3, eval: evalSubstr},
		{name: "$subtract", arity: 2, eval: evalSubtract},
		{name: "$sum", arity: -1, eval: evalArrayAccumulator},
		{name: "$switch", compile: unnamed(compileSwitch)},
		{name: "$toBool", arity: 1, eval: evalConvert},
		{name: "$toDate", arity: 1, eval: evalConvert},
		{name: "$toDecimal", arity: 1, eval: evalConvert},
		{name: "$toDouble", arity: 1, eval: evalConvert},
		{name: "$toInt", arity: 1, eval: evalConvert},
		{name: "$toLong", arity: 1, eval: evalConvert},
		{name: "$toLower", arity: 1, eval: evalCase},
		{name: "$toObjectId", arity: 1, eval: evalConvert},
		{name: "$toString", arity: 1, eval: evalConvert},
		{name: "$toUpper", arity: 1, eval: evalCase},
		{name: "$trim", compile: compileTrim},
		{name: "$trunc", arity: -1, eval: evalRoundPlace},
		{name: "$type", arity: 1, eval: evalType},
		{name: "$unsetField", compile: compileFieldOp},
		{name: "$week", compile: compileDatePart},
		{name: "$year", compile: compileDatePart},
		{name: "$zip", compile: unnamed(compileZip)},
	}
}

// topLevelOperator is one query operator that stands at the top of a
// filter or of an $and/$or/$nor clause, in place of a field name.
type topLevelOperator struct {
	name  string
	parse func(key string, v bson.RawValue, depth int) (node, error)
}

func (op topLevelOperator) opName() string { return op.name }

// fieldOperator is one query operator on a field: {path: {name: v}}.
// parse is nil for $regex and $options, which parseOperators reads as a
// pair.
type fieldOperator struct {
	name  string
	parse func(path, name string, v bson.RawValue, depth int) (node, error)
}

func (op fieldOperator) opName() string { return op.name }

// topLevelOperators and fieldOperators are every query operator, sorted
// by name. filter_parse.go parses them; filter.go matches.
var (
	topLevelOperators []topLevelOperator
	fieldOperators    []fieldOperator
)

func init() {
	topLevelOperators = []topLevelOperator{
		{name: "$alwaysFalse", parse: parseAlwaysFalse},
		{name: "$alwaysTrue", parse: parseAlwaysTrue},
		{name: "$and", parse: parseLogical},
		{name: "$comment", parse: parseComment},
		{name: "$db", parse: parseDBRefField},
		{name: "$expr", parse: parseExprMatch},
		{name: "$id", parse: parseDBRefField},
		{name: "$jsonSchema", parse: parseJSONSchema},
		{name: "$nor", parse: parseLogical},
		{name: "$or", parse: parseLogical},
		{name: "$ref", parse: parseDBRefField},
		{name: "$sampleRate", parse: refuseTopLevel},
		{name: "$text", parse: parseText},
		{name: "$where", parse: refuseTopLevel},
	}
	fieldOperators = []fieldOperator{
		{name: "$all", parse: parseAllOp},
		{name: "$bitsAllClear", parse: refuseField},
		{name: "$bitsAllSet", parse: refuseField},
		{name: "$bitsAnyClear", parse: refuseField},
		{name: "$bitsAnySet", parse: refuseField},
		{name: "$comment", parse: parseFieldComment},
		{name: "$elemMatch", parse: parseElemMatchOp},
		{name: "$eq", parse: parseEq},
		{name: "$exists", parse: parseExists},
		{name: "$geoIntersects", parse: refuseField},
		{name: "$geoWithin", parse: refuseField},
		{name: "$gt", parse: parseCmp},
		{name: "$gte", parse: parseCmp},
		{name: "$in", parse: parseInNin},
		{name: "$jsonSchema", parse: refuseField},
		{name: "$lt", parse: parseCmp},
		{name: "$lte", parse: parseCmp},
		{name: "$mod", parse: parseModOp},
		{name: "$ne", parse: parseNe},
		{name: "$near", parse: refuseField},
		{name: "$nearSphere", parse: refuseField},
		{name: "$nin", parse: parseInNin},
		{name: "$not", parse: parseNotOp},
		{name: "$options"}, // with $regex/$options: parseOperators combines the pair
		{name: "$regex"},   // with $regex/$options: parseOperators combines the pair
		{name: "$size", parse: parseSizeOp},
		{name: "$text", parse: refuseField},
		{name: "$type", parse: parseTypeOp},
		{name: "$where", parse: parseFieldWhere},
	}
}

// updateOperator is one update operator: {name: {path: arg, ...}}. Its
// arguments are parsed per path by Update.compileEntry (update.go) and
// applied by applier.applyAt (update_apply.go), which share the parsing
// of paths and conflicts between them, so the entry holds only the name.
type updateOperator struct {
	name string
}

func (op updateOperator) opName() string { return op.name }

// updateOperators is every update operator, sorted by name.
var updateOperators = []updateOperator{
	{name: "$addToSet"},
	{name: "$bit"},
	{name: "$currentDate"},
	{name: "$inc"},
	{name: "$max"},
	{name: "$min"},
	{name: "$mul"},
	{name: "$pop"},
	{name: "$pull"},
	{name: "$pullAll"},
	{name: "$push"},
	{name: "$rename"},
	{name: "$set"},
	{name: "$setOnInsert"},
	{name: "$unset"},
}

// accumulatorOperator is one $group accumulator. new returns a fresh one for a
// group; nil means the accumulator takes a specification document, parsed
// by compileNAccumulator ($firstN ... $bottomN).
type accumulatorOperator struct {
	name string
	new  func() accumulator
}

func (op accumulatorOperator) opName() string { return op.name }

// accumulators is every $group accumulator, sorted by name, in
// accumulate.go and accumulate_n.go. $sum, $avg, $min, $max, $stdDevPop
// and $stdDevSamp are also expressions (evalArrayAccumulator).
var accumulators = []accumulatorOperator{
	{name: "$addToSet", new: func() accumulator { return &setAcc{seen: map[string]bool{}} }},
	{name: "$avg", new: func() accumulator { return &avgAcc{} }},
	{name: "$bottom"},
	{name: "$bottomN"},
	{name: "$count", new: func() accumulator { return &sumAcc{} }}, // of the constant 1
	{name: "$first", new: func() accumulator { return &firstAcc{} }},
	{name: "$firstN"},
	{name: "$last", new: func() accumulator { return &lastAcc{} }},
	{name: "$lastN"},
	{name: "$max", new: func() accumulator { return &minMaxAcc{max: true} }},
	{name: "$maxN"},
	{name: "$mergeObjects", new: func() accumulator { return &mergeAcc{} }},
	{name: "$min", new: func() accumulator { return &minMaxAcc{max: false} }},
	{name: "$minN"},
	{name: "$push", new: func() accumulator { return &pushAcc{} }},
	{name: "$stdDevPop", new: func() accumulator { return &stdDevAcc{samp: false} }},
	{name: "$stdDevSamp", new: func() accumulator { return &stdDevAcc{samp: true} }},
	{name: "$sum", new: func() accumulator { return &sumAcc{} }},
	{name: "$top"},
	{name: "$topN"},
}

// stageOperator is one aggregation stage. compile is nil for a stage MongoDB
// has and this package does not run: it is refused as unsupported (115)
// rather than unknown (40324). update marks the stages an update pipeline
// may hold.
type stageOperator struct {
	name    string
	compile func(name string, v bson.RawValue) (stage, error)
	update  bool
}

func (op stageOperator) opName() string { return op.name }

// pipelineStages is every aggregation stage name, sorted. Files are named by
// family: stage_select.go ($match, $sort, $limit, $skip, $sample),
// stage_shape.go ($project, $unset, $addFields/$set,
// $replaceRoot/$replaceWith), stage_group.go ($group, $count,
// $sortByCount, $bucket, $bucketAuto), stage_unwind.go, stage_lookup.go
// ($lookup, $unionWith), stage_graphlookup.go, stage_window.go
// ($setWindowFields) and stage_facet.go. The server runs $out, $merge
// and $changeStream itself, around a pipeline.
var pipelineStages []stageOperator

func init() {
	pipelineStages = []stageOperator{
		{name: "$addFields", compile: compileAddFieldsStage, update: true},
		{name: "$bucket", compile: unnamedStage(compileBucket)},
		{name: "$bucketAuto", compile: unnamedStage(compileBucketAuto)},
		{name: "$changeStream"},                // not run here
		{name: "$changeStreamSplitLargeEvent"}, // not run here
		{name: "$collStats"},                   // not run here
		{name: "$count", compile: compileCountStage},
		{name: "$currentOp"}, // not run here
		{name: "$densify"},   // not run here
		{name: "$documents"}, // not run here
		{name: "$facet", compile: unnamedStage(compileFacet)},
		{name: "$fill"},    // not run here
		{name: "$geoNear"}, // not run here
		{name: "$graphLookup", compile: unnamedStage(compileGraphLookup)},
		{name: "$group", compile: unnamedStage(compileGroup)},
		{name: "$indexStats"}, // not run here
		{name: "$limit", compile: compileLimitStage},
		{name: "$listLocalSessions"}, // not run here
		{name: "$listSessions"},      // not run here
		{name: "$lookup", compile: unnamedStage(compileLookup)},
		{name: "$match", compile: compileMatchStage},
		{name: "$merge"},          // not run here
		{name: "$out"},            // not run here
		{name: "$planCacheStats"}, // not run here
		{name: "$project", compile: compileProjectStage, update: true},
		{name: "$redact"}, // not run here
		{name: "$replaceRoot", compile: compileReplaceRootStage, update: true},
		{name: "$replaceWith", compile: compileReplaceRootStage, update: true},
		{name: "$sample", compile: unnamedStage(compileSample)},
		{name: "$search"},     // not run here
		{name: "$searchMeta"}, // not run here
		{name: "$set", compile: compileAddFieldsStage, update: true},
		{name: "$setWindowFields", compile: unnamedStage(compileSetWindowFields)},
		{name: "$skip", compile: compileSkipStage},
		{name: "$sort", compile: compileSortStage},
		{name: "$sortByCount", compile: compileSortByCountStage},
		{name: "$unionWith", compile: unnamedStage(compileUnionWith)},
		{name: "$unset", compile: compileUnsetStage, update: true},
		{name: "$unwind", compile: unnamedStage(compileUnwind)},
		{name: "$vectorSearch"}, // not run here
	}
}

// unnamedStage adapts a stage compiler that serves one stage only.
func unnamedStage(compile func(v bson.RawValue) (stage, error)) func(string, bson.RawValue) (stage, error) {
	return func(_ string, v bson.RawValue) (stage, error) { return compile(v) }
}

// unnamed adapts a compiler that serves one operator only.
func unnamed(compile func(arg bson.RawValue, vars scope) (expr, error)) func(string, bson.RawValue, scope) (expr, error) {
	return func(_ string, arg bson.RawValue, vars scope) (expr, error) { return compile(arg, vars) }
}

// compileLiteral is $literal: the argument, not evaluated.
func compileLiteral(_ string, arg bson.RawValue, _ scope) (expr, error) {
	return literalExpr{arg}, nil
}
