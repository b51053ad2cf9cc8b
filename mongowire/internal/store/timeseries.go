package store

import (
	"encoding/binary"
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// A time-series collection keeps its measurements as documents, one per
// measurement, so that every read (find, aggregate, count, ...) sees
// them as mongod's bucket unpacking shows them. What differs from a
// collection is what mongod 7.0 enforces: the time field holds a date, _id
// is not unique (and has no index to list), updates may only match and
// change the metaField (with multi and without upsert), and
// expireAfterSeconds expires measurements by their time field (ttl.go).
// Its system.buckets.<name> collection is listed, not materialised.

// tsSpec is a time-series collection's options.
type tsSpec struct {
	timeField, metaField string
}

// bucketSpans are mongod's bucketMaxSpanSeconds for each granularity.
var bucketSpans = map[string]int32{"seconds": 3600, "minutes": 86400, "hours": 2592000}

// normaliseTimeseries checks the timeseries and expireAfterSeconds
// options of a create and returns the options with timeseries in the
// shape mongod 7.0 lists: {timeField, metaField?, granularity,
// bucketMaxSpanSeconds} or, with custom bucketing, {timeField,
// metaField?, bucketRoundingSeconds, bucketMaxSpanSeconds}. ok is false
// when the options ask for no time-series collection.
func normaliseTimeseries(options bson.D) (bson.D, bool, error) {
	at := -1
	for i, o := range options {
		if o.Key == "timeseries" {
			at = i
		}
	}
	if at < 0 {
		return options, false, nil
	}
	for _, o := range options {
		switch o.Key {
		case "capped", "viewOn", "clusteredIndex", "validator":
			return nil, false, mongoerr.New(mongoerr.InvalidOptions, "option not supported on a time-series collection: %s", o.Key)
		}
	}
	v, _ := rawOption(options[at].Value)
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		return nil, false, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.timeseries' is the wrong type '%s', expected type 'object'", typeNameOf(v.Type))
	}
	var (
		ts                tsSpec
		granularity       string
		maxSpan, rounding int64
		hasSpan, hasRound bool
		hasGran, hasTime  bool
		hasMeta           bool
	)
	elems, _ := doc.Elements()
	for _, e := range elems {
		ev := e.Value()
		wantString := func(dst *string) error {
			s, ok := ev.StringValueOK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'timeseries.%s' is the wrong type '%s', expected type 'string'", e.Key(), typeNameOf(ev.Type))
			}
			*dst = s
			return nil
		}
		wantInt := func(dst *int64) error {
			n, ok := ev.AsInt64OK()
			if !ok {
				return mongoerr.New(mongoerr.TypeMismatch, "BSON field 'timeseries.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", e.Key(), typeNameOf(ev.Type))
			}
			*dst = n
			return nil
		}
		var err error
		switch e.Key() {
		case "timeField":
			hasTime, err = true, wantString(&ts.timeField)
		case "metaField":
			hasMeta, err = true, wantString(&ts.metaField)
		case "granularity":
			hasGran, err = true, wantString(&granularity)
		case "bucketMaxSpanSeconds":
			hasSpan, err = true, wantInt(&maxSpan)
		case "bucketRoundingSeconds":
			hasRound, err = true, wantInt(&rounding)
		default:
			err = mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'timeseries.%s' is an unknown field.", e.Key())
		}
		if err != nil {
			return nil, false, err
		}
	}
	switch {
	case !hasTime:
		return nil, false, mongoerr.New(40414, "BSON field 'timeseries.timeField' is missing but a required field")
	case ts.timeField == "" || strings.Contains(ts.timeField, ".") || strings.HasPrefix(ts.timeField, "$"):
		return nil, false, mongoerr.New(mongoerr.BadValue, "The 'timeField' must be a valid field name: %q", ts.timeField)
	case hasMeta && (ts.metaField == "" || strings.Contains(ts.metaField, ".") || strings.HasPrefix(ts.metaField, "$")):
		return nil, false, mongoerr.New(mongoerr.BadValue, "The 'metaField' must be a valid field name: %q", ts.metaField)
	case hasMeta && ts.metaField == "_id":
		return nil, false, mongoerr.New(mongoerr.BadValue, "The 'metaField' cannot be \"_id\"")
	case hasMeta && ts.metaField == ts.timeField:
		return nil, false, mongoerr.New(mongoerr.BadValue, "The 'metaField' and 'timeField' cannot be the same")
	case hasGran && bucketSpans[granularity] == 0:
		return nil, false, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field 'timeseries.granularity' is not a valid value.", granularity)
	case hasGran && hasSpan && !hasRound && maxSpan == int64(bucketSpans[granularity]):
		// The listed form ({granularity, bucketMaxSpanSeconds}), as
		// mongorestore sends it back: the span is the granularity's.
		hasSpan = false
	case hasGran && (hasSpan || hasRound):
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' cannot be set with 'granularity' (but for the granularity's own span)")
	case hasSpan != hasRound:
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' must both be set")
	case hasSpan && maxSpan != rounding:
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' fields must be equal")
	case hasSpan && (maxSpan < 1 || maxSpan > 31536000):
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "Time-series 'bucketMaxSpanSeconds' must be between 1 and 31536000")
	}
	norm := bson.D{{Key: "timeField", Value: ts.timeField}}
	if hasMeta {
		norm = append(norm, bson.E{Key: "metaField", Value: ts.metaField})
	}
	if hasSpan {
		norm = append(norm, bson.E{Key: "bucketRoundingSeconds", Value: int32(rounding)}, bson.E{Key: "bucketMaxSpanSeconds", Value: int32(maxSpan)})
	} else {
		if !hasGran {
			granularity = "seconds"
		}
		norm = append(norm, bson.E{Key: "granularity", Value: granularity}, bson.E{Key: "bucketMaxSpanSeconds", Value: bucketSpans[granularity]})
	}
	out := make(bson.D, 0, len(options))
	for i, o := range options {
		switch {
		case i == at:
			out = append(out, bson.E{Key: "timeseries", Value: norm})
		case o.Key == "expireAfterSeconds":
			v, _ := rawOption(o.Value)
			if !isNumber(v.Type) {
				return nil, false, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'", typeNameOf(v.Type))
			}
			if f := v.AsFloat64(); math.IsNaN(f) || f < 0 || f > math.MaxInt32 {
				return nil, false, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
			out = append(out, bson.E{Key: "expireAfterSeconds", Value: int64(v.AsFloat64())})
		default:
			out = append(out, o)
		}
	}
	return out, true, nil
}

// parseTimeseries reads the normalised timeseries option, or nil.
func parseTimeseries(options bson.D) *tsSpec {
	v := lookupD(options, "timeseries")
	if v == nil {
		return nil
	}
	tf, _ := lookupD(v, "timeField").(string)
	mf, _ := lookupD(v, "metaField").(string)
	if tf == "" {
		return nil
	}
	return &tsSpec{timeField: tf, metaField: mf}
}

// checkMeasurement refuses a measurement without a date in the time
// field, as mongod does.
func (ts *tsSpec) checkMeasurement(doc bson.Raw) *mongoerr.Error {
	if v, err := doc.LookupErr(ts.timeField); err != nil || v.Type != bson.TypeDateTime {
		return mongoerr.New(mongoerr.BadValue, "'%s' must be present and contain a valid BSON UTC datetime value", ts.timeField)
	}
	return nil
}

// checkUpdate enforces mongod 7.0's limits on updates of a time-series
// collection: a metaField, multi, no upsert, update operators only, a
// filter and changes on the metaField (or its subfields) only.
func (ts *tsSpec) checkUpdate(spec UpdateSpec) error {
	invalid := func(msg string) error { return mongoerr.New(mongoerr.InvalidOptions, "%s", msg) }
	if ts.metaField == "" {
		return invalid("Cannot perform an update on a time-series collection that does not have a metaField")
	}
	if !spec.Multi {
		return invalid("Cannot perform a non-multi update on a time-series collection")
	}
	if spec.Upsert {
		return invalid("Cannot perform an upsert on a time-series collection")
	}
	if len(spec.ArrayFilters) > 0 {
		return invalid("Cannot perform an update with arrayFilters on a time-series collection")
	}
	onMeta := func(path string) bool { return path == ts.metaField || strings.HasPrefix(path, ts.metaField+".") }
	if !ts.filterOnMeta(spec.Filter, onMeta) {
		return invalid("Cannot perform an update on a time-series collection which queries a field that is not the metaField '" + ts.metaField + "'")
	}
	if spec.Update.Type != bson.TypeEmbeddedDocument {
		return invalid("Cannot perform an update on a time-series collection with an aggregation pipeline")
	}
	ops, _ := spec.Update.Document().Elements()
	for _, op := range ops {
		if !strings.HasPrefix(op.Key(), "$") {
			return invalid("Cannot perform an update on a time-series collection using a replacement document")
		}
		fields, _ := op.Value().Document().Elements()
		for _, f := range fields {
			to := ""
			if op.Key() == "$rename" {
				to, _ = f.Value().StringValueOK()
			}
			if !onMeta(f.Key()) || op.Key() == "$rename" && !onMeta(to) {
				return invalid("Cannot perform an update on a time-series collection which updates a field that is not the metaField '" + ts.metaField + "'")
			}
		}
	}
	return nil
}

// filterOnMeta reports whether every field a filter queries passes
// onMeta, through $and, $or and $nor.
func (ts *tsSpec) filterOnMeta(filter bson.Raw, onMeta func(string) bool) bool {
	elems, _ := filter.Elements()
	for _, e := range elems {
		switch e.Key() {
		case "$and", "$or", "$nor":
			subs, _ := e.Value().Array().Values()
			for _, sub := range subs {
				d, ok := sub.DocumentOK()
				if !ok || !ts.filterOnMeta(d, onMeta) {
					return false
				}
			}
		default:
			if strings.HasPrefix(e.Key(), "$") || !onMeta(e.Key()) {
				return false
			}
		}
	}
	return true
}

// IsTimeseries reports whether ns is a time-series collection.
func (s *Store) IsTimeseries(ns Namespace) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := s.collLocked(ns)
	return c != nil && c.ts != nil
}

// bucketsInfo is the listing of a time-series collection's
// system.buckets.<name>, as mongod lists it (clustered, with the
// timeseries options).
func bucketsInfo(info CollectionInfo) CollectionInfo {
	opts := bson.D{{Key: "clusteredIndex", Value: true}}
	if ts := lookupD(info.Options, "timeseries"); ts != nil {
		opts = append(opts, bson.E{Key: "timeseries", Value: ts})
	}
	return CollectionInfo{Name: "system.buckets." + info.Name, UUID: info.UUID, Options: opts, TimeseriesBuckets: true}
}

// timeseriesTTL returns the expireAfterSeconds of a time-series collection.
func timeseriesTTL(c *collection) (float64, bool) {
	if c.ts == nil {
		return 0, false
	}
	v, ok := rawOption(lookupD(c.info.Options, "expireAfterSeconds"))
	if !ok || !isNumber(v.Type) {
		return 0, false
	}
	return v.AsFloat64(), true
}

// bucketRounding is the rounding of a bucket's minimum time, in seconds,
// by granularity (bucketRoundingSeconds when given).
func (ts *tsSpec) rounding(options bson.D) int64 {
	v := lookupD(options, "timeseries")
	if r, ok := rawOption(lookupD(v, "bucketRoundingSeconds")); ok && isNumber(r.Type) {
		return int64(r.AsFloat64())
	}
	g, _ := lookupD(v, "granularity").(string)
	switch g {
	case "minutes":
		return 3600
	case "hours":
		return 86400
	}
	return 60
}

// bucketsOf shows measurements as mongod's system.buckets.<name> holds
// them, one uncompressed (version 1) bucket per measurement: {_id,
// control: {version: 1, min, max}, meta, data: {<field>: {"0": value}}},
// the minimum time rounded down as mongod rounds it. It is what
// mongodump reads, and insertBuckets reads it back.
func bucketsOf(ts *tsSpec, rounding int64, docs []bson.Raw) []bson.Raw {
	out := make([]bson.Raw, 0, len(docs))
	for i, d := range docs {
		elems, _ := d.Elements()
		t, _ := d.Lookup(ts.timeField).DateTimeOK()
		minT := t
		if r := rounding * 1000; r > 0 {
			minT = t - ((t%r)+r)%r
		}
		var id bson.ObjectID
		binary.BigEndian.PutUint32(id[:4], uint32(minT/1000))
		binary.BigEndian.PutUint64(id[4:], uint64(i))
		var fields, minD, maxD, data bson.D
		var meta bson.RawValue
		for _, e := range elems {
			if ts.metaField != "" && e.Key() == ts.metaField {
				meta = e.Value()
				continue
			}
			fields = append(fields, bson.E{Key: e.Key(), Value: e.Value()})
		}
		for _, f := range fields {
			lo := f.Value
			if f.Key == ts.timeField {
				lo = bson.DateTime(minT)
			}
			minD = append(minD, bson.E{Key: f.Key, Value: lo})
			maxD = append(maxD, f)
			data = append(data, bson.E{Key: f.Key, Value: bson.D{{Key: "0", Value: f.Value}}})
		}
		b := bson.D{{Key: "_id", Value: id}, {Key: "control", Value: bson.D{{Key: "version", Value: int32(1)}, {Key: "min", Value: minD}, {Key: "max", Value: maxD}}}}
		if meta.Type != 0 {
			b = append(b, bson.E{Key: "meta", Value: meta})
		}
		b = append(b, bson.E{Key: "data", Value: data})
		raw, err := bson.Marshal(b)
		if err == nil {
			out = append(out, raw)
		}
	}
	return out
}

// bucketsView returns the buckets of a time-series collection when ns
// is its system.buckets.<name> (ok), for the reads of viewDocs.
func (s *Store) bucketsView(rd *Txn, ns Namespace) (docs []bson.Raw, ok bool) {
	base, isBuckets := strings.CutPrefix(ns.Coll, "system.buckets.")
	if !isBuckets {
		return nil, false
	}
	var ts *tsSpec
	var rounding int64
	_ = s.read(func() error {
		c := s.collLocked(Namespace{DB: ns.DB, Coll: base})
		if c == nil || c.ts == nil || s.collLocked(ns) != nil {
			return nil
		}
		ts, rounding, ok = c.ts, c.ts.rounding(c.info.Options), true
		docs = s.docsAsLocked(rd, Namespace{DB: ns.DB, Coll: base}, c)
		return nil
	})
	if !ok {
		return nil, false
	}
	return bucketsOf(ts, rounding, docs), true
}

// unpackBuckets turns bucket documents written to system.buckets.<name>
// (as mongorestore writes a dump's) into the measurements they hold.
// Only uncompressed (version 1) buckets can be read.
func unpackBuckets(ts *tsSpec, buckets []bson.Raw) ([]bson.Raw, *mongoerr.Error) {
	var out []bson.Raw
	for _, b := range buckets {
		if v, _ := b.Lookup("control", "version").AsInt64OK(); v != 1 {
			return nil, mongoerr.New(mongoerr.CommandNotSupported, "only uncompressed (version 1) time-series buckets can be written to this server")
		}
		data, ok := b.Lookup("data").DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "a time-series bucket needs a data document")
		}
		meta := b.Lookup("meta")
		cols, _ := data.Elements()
		// The rows are the keys of the time field's column.
		timeCol, ok := data.Lookup(ts.timeField).DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.BadValue, "a time-series bucket needs the '%s' column", ts.timeField)
		}
		rows, _ := timeCol.Elements()
		for _, row := range rows {
			var d bson.D
			for _, col := range cols {
				cd, ok := col.Value().DocumentOK()
				if !ok {
					continue
				}
				if v, err := cd.LookupErr(row.Key()); err == nil {
					d = append(d, bson.E{Key: col.Key(), Value: v})
				}
			}
			if meta.Type != 0 && ts.metaField != "" {
				d = append(d, bson.E{Key: ts.metaField, Value: meta})
			}
			raw, err := bson.Marshal(d)
			if err != nil {
				return nil, mongoerr.New(mongoerr.BadValue, "unpack a time-series bucket: %v", err)
			}
			out = append(out, raw)
		}
	}
	return out, nil
}

// insertBuckets writes bucket documents to system.buckets.<name> as the
// measurements they hold (mongorestore restores a time-series collection
// so). n counts the buckets; a failure fails the batch at its first
// bucket. Writing buckets of anything but a time-series collection is
// refused as any system collection write is.
func (s *Store) insertBuckets(rd *Txn, ns, base Namespace, buckets []bson.Raw, opts InsertOptions) (int, []WriteError) {
	var ts *tsSpec
	_ = s.read(func() error {
		if c := s.collLocked(base); c != nil {
			ts = c.ts
		}
		return nil
	})
	if ts == nil {
		return 0, []WriteError{{Index: 0, Err: mongoerr.New(mongoerr.InvalidNamespace, "cannot write to '%s'", ns)}}
	}
	docs, err := unpackBuckets(ts, buckets)
	if err != nil {
		return 0, []WriteError{{Index: 0, Err: err}}
	}
	if _, errs := s.insert(rd, base, docs, opts); len(errs) > 0 {
		return 0, []WriteError{{Index: 0, Err: errs[0].Err}}
	}
	return len(buckets), nil
}
