package store

import (
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
	case hasGran && (hasSpan || hasRound):
		return nil, false, mongoerr.New(mongoerr.InvalidOptions, "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' cannot be set with 'granularity'")
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
