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
//
// # The Debezium value
//
// Debezium.Encode writes what Debezium's MongoDB connector (3.x) sends as
// a change event's value, as Kafka Connect's JSON converter renders it
// with schemas.enable=false (no schema/payload wrapper), fields in
// Debezium's order:
//
//	before             the pre-image, or null: a JSON string of the document
//	after              the document after the change (insert, replace, snapshot
//	                   read, update with a full document), or null
//	updateDescription  updates only: {removedFields, updatedFields, truncatedArrays}
//	source             {version, connector: "mongodb", name, ts_ms, snapshot,
//	                   db, sequence, ts_us, ts_ns, collection, ord, lsid,
//	                   txnNumber, wallTime}
//	op                 c (insert), u (update, replace), d (delete), r (snapshot)
//	ts_ms, ts_us, ts_ns  when the event was encoded
//	transaction        null (Debezium fills it only on request)
//
// before, after and lsid hold the document in the MongoDB Java driver's
// legacy strict JSON (JsonMode.STRICT), which is what Debezium writes:
// relaxed Extended JSON but for int64 ({"$numberLong":"n"}), dates
// ({"$date":ms}), binaries ({"$binary":"…","$type":"04"}), regular
// expressions ({"$regex":"…","$options":"…"}) and DBPointers
// ({"$ref":…,"$id":…}). updatedFields is relaxed Extended JSON, as
// Debezium's BsonDocument.toJson() writes it; removedFields and
// truncatedArrays ([{field, size}]) are null when empty. source.ts_ms and
// ord are the cluster time's seconds (in milliseconds) and increment; a
// snapshot read, which has no cluster time, is stamped with the encoding
// time. Debezium sends no value for collection operations (drop, rename,
// dropDatabase, create, index changes, modify) or an invalidate, so
// Encode appends nothing for them, as for a marker; a message (a NATS
// payload) is an error.
package encode
