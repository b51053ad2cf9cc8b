// Package transform shapes changes on their way from a source to a sink:
// filters, field drops and renames, masks, computed fields and routes,
// the transforms: list of a pipeline file. A Chain runs in the pipeline's
// ordered parallel encode stage (pipeline.Config.Transform), on the raw
// BSON of each change, so it scales with the encode workers and keeps the
// order; with no transforms the encode stage runs as it always did.
//
// Expressions (filter's where, set, route) are CEL
// (https://cel.dev), compiled and type-checked by Compile, bounded in
// cost, and deterministic: CEL has no clock, so a change replayed after
// a crash is transformed into the same bytes. They see these variables:
//
//	op            string: insert, update, replace, delete, ...
//	ns            map: ns.db, ns.coll (for a NATS message, ns.coll is its subject)
//	key           the document key, or null
//	doc           the full document, or null when the change has none; a NATS message's JSON object payload
//	before        the before-image, or null
//	update        the update description (updatedFields, removedFields), or null
//	cluster_time  timestamp
//	wall_time     timestamp, or null
//	subject, headers, payload   a NATS message's subject, headers (map of lists) and parsed JSON payload
//
// BSON values reach CEL as: int32 and int64 → int; double → double;
// decimal128 → double when exact, else string; string → string; bool →
// bool; date and timestamp → timestamp; ObjectId → string (hex); binary
// → bytes; null or a missing field → null; document → map; array → list.
// So `doc.qty * 2` works on an int32 field, and fails on a string, which
// is an error of that change, handled by the pipeline's on_error.
//
// A program adds its own transform as a Func step.
package transform
