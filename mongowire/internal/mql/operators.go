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
// The tables are filled in init, not by their declarations, only because
// their functions refer back to them (an expression compiles its
// arguments through compileOperator, which reads exprOperators), which a
// package-level initializer may not do.

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

// unnamed adapts a compiler that serves one operator only.
func unnamed(compile func(arg bson.RawValue, vars scope) (expr, error)) func(string, bson.RawValue, scope) (expr, error) {
	return func(_ string, arg bson.RawValue, vars scope) (expr, error) { return compile(arg, vars) }
}

// compileLiteral is $literal: the argument, not evaluated.
func compileLiteral(_ string, arg bson.RawValue, _ scope) (expr, error) {
	return literalExpr{arg}, nil
}
