// Package encode turns change events into output records: a raw-BSON to
// Extended JSON v2 writer, and the CDC envelope built on it. It is Tide's
// hot path, so it walks the BSON bytes once, validating lengths and bounds
// as it goes, and appends to a caller's buffer without allocating.
//
// # Extended JSON
//
// AppendRelaxed and AppendCanonical write a BSON document as relaxed or
// canonical Extended JSON v2, byte-identical to the MongoDB Go driver's
// bson.MarshalExtJSON(bson.Raw(doc), canonical, false) for every BSON type.
// AppendRelaxedValue and AppendCanonicalValue do the same for a single
// value, and AppendString escapes a Go string the same way. Malformed input
// is an error wrapping ErrMalformed that names the offset and the problem;
// nesting deeper than MaxDepth is an error wrapping ErrTooDeep (the
// driver has no limit; that is the one input it accepts and these writers
// refuse). No input makes them panic. Where the driver bends the BSON
// specification, they bend it the same way: array keys are not checked,
// bytes after the top-level document are ignored, an old binary (subtype 2)
// value is read by its inner length, and a code-with-scope string's last
// byte is dropped unchecked.
//
// # The envelope
//
// Envelope writes one JSON object per event, without a trailing newline,
// with these fields in this order:
//
//	_namespace       "db.collection", or the NATS subject
//	_op              the operation: insert, update, replace, delete, ...
//	_document_key    the document key ({"_id": ...}), or null
//	_cluster_time_s  the cluster time's seconds (0 if unknown)
//	_cluster_time_i  the cluster time's increment
//	_wall_time_ms    the wall-clock time of the change, Unix milliseconds (0 if unknown)
//	_full_document   the document after the change, or null; for a message, its payload
//	_before          the document before the change; only when the event has a pre-image
//	_update_desc     the update description (updatedFields, removedFields, ...), or null
//	_extra           other event fields (rename's "to", DDL details); only when present
//	_headers         message headers, {"name": ["value", ...]}, keys sorted; only when present
//	_resume_token    the change event's _id ({"_data": "82..."}), or null
//
// Documents are relaxed Extended JSON (CanonicalEnvelope writes canonical
// Extended JSON instead). A message's payload is embedded in _full_document
// by its format: JSON as it is (line breaks become spaces, so the record
// stays one line; an empty payload is null), text as a JSON string, bytes as
// a base64 JSON string. A marker event (cdc.OpMarker) has no record:
// Envelope appends nothing for it.
package encode
