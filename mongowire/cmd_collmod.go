package mongowire

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdCollMod: {collMod: "c", changeStreamPreAndPostImages: {enabled},
// validator, validationLevel, validationAction, index: {name | keyPattern,
// expireAfterSeconds}} -> {} (with the index: {expireAfterSeconds_old?,
// expireAfterSeconds_new}).
func (s *Server) cmdCollMod(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	options := fieldsExcept(r.cmd)
	var reply bson.D
	for i, o := range options {
		if o.Key != "index" {
			continue
		}
		ref, secs, err := parseCollModIndex(o.Value)
		if err != nil {
			return nil, err
		}
		old, had, err := s.store.CollModTTL(ns, ref, secs)
		if err != nil {
			return nil, err
		}
		if had {
			reply = append(reply, bson.E{Key: "expireAfterSeconds_old", Value: int64(old)})
		}
		reply = append(reply, bson.E{Key: "expireAfterSeconds_new", Value: secs})
		options = append(options[:i:i], options[i+1:]...)
		break
	}
	if len(options) > 0 || reply == nil {
		if err := s.store.CollMod(ns, options); err != nil {
			return nil, err
		}
	}
	return append(bson.D{}, reply...), nil
}

// parseCollModIndex reads collMod's index: {name | keyPattern,
// expireAfterSeconds}; the other index changes mongod has (hidden,
// unique, prepareUnique) are refused.
func parseCollModIndex(v any) (store.IndexRef, int64, error) {
	var ref store.IndexRef
	rv, ok := v.(bson.RawValue)
	d, isDoc := rv.DocumentOK()
	if !ok || !isDoc {
		return ref, 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index' is the wrong type, expected type 'object'")
	}
	secs := int64(-1)
	elems, _ := d.Elements()
	for _, e := range elems {
		ev := e.Value()
		switch e.Key() {
		case "name":
			n, ok := ev.StringValueOK()
			if !ok {
				return ref, 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.name' is the wrong type '%s', expected type 'string'", typeName(ev.Type))
			}
			ref.Name = n
		case "keyPattern":
			kd, ok := ev.DocumentOK()
			if !ok {
				return ref, 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.keyPattern' is the wrong type '%s', expected type 'object'", typeName(ev.Type))
			}
			if err := bson.Unmarshal(kd, &ref.KeyPattern); err != nil {
				return ref, 0, mongoerr.New(mongoerr.InvalidBSON, "keyPattern: %v", err)
			}
		case "expireAfterSeconds":
			f, ok := numberValue(ev)
			if !ok {
				return ref, 0, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'", typeName(ev.Type))
			}
			if f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
				return ref, 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
			secs = int64(f)
		case "hidden", "unique", "prepareUnique", "forceNonUnique":
			return ref, 0, mongoerr.New(mongoerr.InvalidOptions, "collMod index option '%s' is not supported by this server", e.Key())
		default:
			return ref, 0, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'collMod.index.%s' is an unknown field.", e.Key())
		}
	}
	switch {
	case ref.Name == "" && ref.KeyPattern == nil:
		return ref, 0, mongoerr.New(mongoerr.InvalidOptions, "must specify either index name or key pattern")
	case ref.Name != "" && ref.KeyPattern != nil:
		return ref, 0, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both key pattern and name.")
	case secs < 0:
		return ref, 0, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds or hidden field")
	}
	return ref, secs, nil
}

func numberValue(v bson.RawValue) (float64, bool) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		return v.AsFloat64(), true
	}
	return 0, false
}
