package store

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Clustered collections: {clusteredIndex: {key: {_id: 1}, unique: true,
// name?}}. Documents are kept by _id here anyway, so clustering changes
// only how the collection describes itself: listCollections shows the
// clusteredIndex (normalised as mongod does) and no idIndex; listIndexes
// shows the _id index with unique and clustered. A clustered collection
// may have a top-level expireAfterSeconds: documents whose _id is a date
// expire by it (ttl.go).

const codeInvalidIndexSpecificationOption int32 = 197

// normaliseClustered checks the clusteredIndex and expireAfterSeconds
// options of a create and returns the options with clusteredIndex in
// mongod's shape {v: 2, key: {_id: 1}, name, unique: true}.
func normaliseClustered(options bson.D) (bson.D, error) {
	at := -1
	hasTTL := false
	for i, o := range options {
		switch o.Key {
		case "clusteredIndex":
			at = i
		case "expireAfterSeconds":
			hasTTL = true
			v, _ := rawOption(o.Value)
			if !isNumber(v.Type) {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'create.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'", typeNameOf(v.Type))
			}
			if f := v.AsFloat64(); f < 0 {
				return nil, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
		}
	}
	if at < 0 {
		if hasTTL {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "'expireAfterSeconds' requires clustering to be enabled")
		}
		return options, nil
	}
	v, _ := rawOption(options[at].Value)
	spec, ok := v.DocumentOK()
	if !ok {
		return nil, mongoerr.New(5979703, "The 'clusteredIndex' option is not supported for a collection that is not a time-series collection: use {key: {_id: 1}, unique: true}")
	}
	name := "_id_"
	unique := false
	var key bson.Raw
	elems, _ := spec.Elements()
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "key":
			key, _ = ev.DocumentOK()
		case "unique":
			unique = ev.Type == bson.TypeBoolean && ev.Boolean()
		case "name":
			s, ok := ev.StringValueOK()
			if !ok {
				return nil, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'clusteredIndex.name' is the wrong type '%s', expected type 'string'", typeNameOf(ev.Type))
			}
			name = s
		case "v":
			if n, ok := ev.AsInt64OK(); !ok || n != 2 {
				return nil, mongoerr.New(codeInvalidIndexSpecificationOption, "Invalid clusteredIndex 'v' field; only v: 2 is supported")
			}
		default:
			return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'clusteredIndex.%s' is an unknown field.", e.Key())
		}
	}
	if key == nil {
		return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'clusteredIndex.key' is missing but a required field")
	}
	if !unique {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "The 'clusteredIndex' option requires unique: true")
	}
	ke, _ := key.Elements()
	if len(ke) != 1 || ke[0].Key() != "_id" || !isNumber(ke[0].Value().Type) || ke[0].Value().AsFloat64() != 1 {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "The clusteredIndex option is only supported for key: {_id: 1}")
	}
	out := append(bson.D{}, options...)
	out[at] = bson.E{Key: "clusteredIndex", Value: bson.D{
		{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}},
		{Key: "name", Value: name}, {Key: "unique", Value: true},
	}}
	return out, nil
}

// clusteredName returns the name of a collection's clustered index, if it
// is clustered.
func clusteredName(options bson.D) (string, bool) {
	for _, o := range options {
		if o.Key != "clusteredIndex" {
			continue
		}
		v, _ := rawOption(o.Value)
		d, ok := v.DocumentOK()
		if !ok {
			return "", false
		}
		if n, ok := d.Lookup("name").StringValueOK(); ok {
			return n, true
		}
		return "_id_", true
	}
	return "", false
}

// Clustered reports whether info describes a clustered collection.
func (info CollectionInfo) Clustered() bool {
	_, ok := clusteredName(info.Options)
	return ok
}

// clusteredSpecs shows the _id index of a clustered collection as mongod
// lists it: {v: 2, key: {_id: 1}, name, unique: true, clustered: true}.
func clusteredSpecs(c *collection, specs []IndexSpec) []IndexSpec {
	name, ok := clusteredName(c.info.Options)
	if !ok || len(specs) == 0 {
		return specs
	}
	specs[0].Name, specs[0].Unique = name, true
	specs[0].Options = append(append(bson.D{}, specs[0].Options...), bson.E{Key: "clustered", Value: true})
	return specs
}

// clusteredTTL returns the expireAfterSeconds of a clustered collection.
func clusteredTTL(c *collection) (float64, bool) {
	if _, ok := clusteredName(c.info.Options); !ok {
		return 0, false
	}
	for _, o := range c.info.Options {
		if o.Key == "expireAfterSeconds" {
			if v, ok := rawOption(o.Value); ok && isNumber(v.Type) {
				return v.AsFloat64(), true
			}
		}
	}
	return 0, false
}
