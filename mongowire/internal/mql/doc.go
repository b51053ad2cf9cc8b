// Package mql is the query language of the embedded MongoDB server: pure
// functions over BSON that compare and sort values, match filters, apply
// updates and projections, and run aggregation pipelines the way MongoDB
// 7.0 does. It imports neither the store nor the wire layer; its errors
// are *mongoerr.Error values carrying MongoDB's codes and messages, so the
// command layer can hand them to clients unchanged.
//
// # Compile once, run many
//
// CompileFilter, CompileUpdate, CompileProjection, CompileSort,
// CompilePipeline and CompileExpr validate their input once and return
// values that are safe for concurrent use. Documents stay bson.Raw: a
// filter walks the bytes of the fields it needs, and an update re-encodes
// only the embedded documents it changes (mdoc.go: opening a document
// lists its elements as slices of the original bytes, and a child gets a
// node of its own only when an update touches it), so nothing is turned
// into maps.
//
// # Semantics worth knowing
//
//   - Compare is MongoDB's total order: type brackets first (MinKey <
//     missing/undefined < null < numbers < strings < objects < arrays <
//     binData < ObjectId < bool < date < timestamp < regex < ... < MaxKey),
//     numbers exactly across int32/int64/double/decimal128. Equal is
//     Compare == 0; appendKey (key.go) hashes values consistently with it.
//   - A filter path reaches every value MongoDB's would: through embedded
//     documents, into each document of an array, numeric components as
//     array indexes, and arrays at the end both whole and element by
//     element. A path that runs into a scalar, an empty array or a
//     document without the field reaches "missing", which {$eq: null}
//     matches. As in MongoDB 7.0 (8.0 changed it), null in $eq, $in,
//     $gte/$lte and $lookup also matches undefined; undefined itself is
//     refused as an operand ("cannot compare to undefined"). Comparison
//     operators stay within the bound's type bracket.
//   - Filter.Predicates reports only constraints an index can answer in
//     full: an $in whose list holds null, an array or a regex is left out
//     entirely rather than reported without those values.
//   - Updates apply their paths in MongoDB's order (field by field, array
//     indexes numerically), so new fields appear as mongod would place
//     them. A no-op update returns the input bytes. Changing _id, conflicting
//     paths, type errors and int64 overflow fail with mongod's codes and
//     leave the document alone.
//   - Aggregation expressions treat missing and null as MongoDB does
//     ({$eq: ["$missing", null]} is false; arithmetic on null is null).
//   - Stages and operators that are not implemented are refused with an
//     error naming them, never ignored: 40324 for unknown stage names, 115
//     for stages MongoDB has but this package does not run ($out, $merge,
//     ...), 168 "Unrecognized expression '$foo'" for expressions.
//   - BindLet implements the let option of the CRUD commands by replacing
//     $$variables with their constant values before compiling.
//   - Regular expressions run on Go's RE2: PCRE-only constructs
//     (lookaround, backreferences) are refused as invalid (51091).
//   - Collations (collation.go, filter_collation.go) work by keys: a
//     Collation turns every string of a value into its x/text collation
//     key, so that Compare, appendKey and an index's order of transformed
//     values are the collation's. Filters, sorts, group keys, comparison
//     expressions and update operators compile "collated" and transform
//     what they compare, never what they return.
//
// # Files
//
// operators.go holds the tables of every operator, one per kind (query,
// update, expression, accumulator, stage), each sorted by name: the one
// place that says what exists and which function handles it. The other
// files are named by what they hold. compare.go, numeric.go and key.go
// order, add and hash values; filter.go matches queries, filter_parse.go
// parses them, and filter_<family>.go holds each family of query
// operators (compare, element, array, logic, eval); update.go parses
// updates and update_apply.go applies them on mdoc.go's editable
// documents; projection.go and sort.go shape results; pipeline.go runs
// aggregation pipelines, a document at a time, and stage_<family>.go
// holds their stages (select, shape, group, unwind, lookup, facet);
// limits.go bounds what a run holds (the stage limit, the $lookup limit,
// the server's Budget) and spill.go sorts $sort and $group input on disk
// past the stage limit; accumulate.go and accumulate_n.go
// the $group accumulators; expr.go compiles expressions and
// expr_<family>.go holds each family of expression operators (arith,
// array, cond, convert, date, logic, object, set, string, var);
// validate.go checks documents for storage.
package mql
