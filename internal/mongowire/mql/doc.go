// Package mql is the query language of the embedded MongoDB server: pure
// functions over BSON that compare and sort values, match filters, apply
// updates and projections, and run aggregation pipelines, the way MongoDB
// 7.0 does. It works on bson.Raw documents without converting them to maps,
// and fails with *mongoerr.Error values carrying MongoDB's codes.
//
// Compile once, run many: CompileFilter, CompileUpdate, CompileProjection,
// CompileSort, CompilePipeline and CompileExpr validate their input and
// return values that are safe for concurrent use.
package mql
