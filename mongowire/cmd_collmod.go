package mongowire

import (
	"context"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdCollMod: {collMod: "c", changeStreamPreAndPostImages: {enabled},
// validator, validationLevel, validationAction, index: {name | keyPattern,
// expireAfterSeconds, hidden, prepareUnique, unique, forceNonUnique},
// dryRun} -> {} (with an index change: <field>_old and <field>_new).
func (s *Server) cmdCollMod(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	options := fieldsExcept(r.cmd)
	dryRun := false
	if i := slices.IndexFunc(options, func(e bson.E) bool { return e.Key == "dryRun" }); i >= 0 {
		rv, _ := options[i].Value.(bson.RawValue)
		dryRun = truthy(rv)
		options = append(options[:i:i], options[i+1:]...)
	}
	var reply bson.D
	for i, o := range options {
		if o.Key != "index" {
			continue
		}
		ref, secs, mod, err := parseCollModIndex(o.Value)
		if err != nil {
			return nil, err
		}
		if dryRun && (!mod.Unique || secs >= 0 || mod.Hidden != nil || mod.PrepareUnique != nil || mod.ForceNonUnique || len(options) > 1) {
			return nil, mongoerr.New(mongoerr.InvalidOptions, "dryRun: true is only supported with index: {unique: true} and no other modification")
		}
		mod.DryRun = dryRun
		if secs >= 0 {
			old, had, err := s.data(ctx).CollModTTL(ns, ref, secs)
			if err != nil {
				return nil, err
			}
			if had {
				reply = append(reply, bson.E{Key: "expireAfterSeconds_old", Value: int64(old)})
			}
			reply = append(reply, bson.E{Key: "expireAfterSeconds_new", Value: secs})
		}
		if mod.Hidden != nil || mod.PrepareUnique != nil || mod.Unique || mod.ForceNonUnique {
			res, err := s.data(ctx).CollModIndex(ns, ref, mod)
			if err != nil {
				return nil, err
			}
			if mod.Hidden != nil {
				reply = append(reply, bson.E{Key: "hidden_old", Value: res.HiddenOld}, bson.E{Key: "hidden_new", Value: res.HiddenNew})
			}
			if mod.PrepareUnique != nil {
				reply = append(reply, bson.E{Key: "prepareUnique_old", Value: res.PrepareUniqueOld}, bson.E{Key: "prepareUnique_new", Value: res.PrepareUniqueNew})
			}
			if mod.Unique && !dryRun {
				reply = append(reply, bson.E{Key: "unique_new", Value: true})
			}
			if mod.ForceNonUnique {
				reply = append(reply, bson.E{Key: "forceNonUnique_new", Value: true})
			}
		}
		options = append(options[:i:i], options[i+1:]...)
		if reply == nil {
			reply = bson.D{}
		}
		break
	}
	if dryRun && reply == nil {
		return nil, mongoerr.New(mongoerr.InvalidOptions, "dryRun: true is only supported with index: {unique: true} and no other modification")
	}
	if len(options) > 0 || reply == nil {
		if err := s.data(ctx).CollMod(ns, options); err != nil {
			return nil, err
		}
	}
	return append(bson.D{}, reply...), nil
}

// parseCollModIndex reads collMod's index: {name | keyPattern,
// expireAfterSeconds, hidden, prepareUnique, unique, forceNonUnique};
// secs is -1 without expireAfterSeconds.
func parseCollModIndex(v any) (store.IndexRef, int64, store.IndexMod, error) {
	var ref store.IndexRef
	var mod store.IndexMod
	rv, ok := v.(bson.RawValue)
	d, isDoc := rv.DocumentOK()
	if !ok || !isDoc {
		return ref, 0, mod, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index' is the wrong type, expected type 'object'")
	}
	secs := int64(-1)
	elems, _ := d.Elements()
	for _, e := range elems {
		ev := e.Value()
		switch k := e.Key(); k {
		case "name":
			n, ok := ev.StringValueOK()
			if !ok {
				return ref, 0, mod, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.name' is the wrong type '%s', expected type 'string'", typeName(ev.Type))
			}
			ref.Name = n
		case "keyPattern":
			kd, ok := ev.DocumentOK()
			if !ok {
				return ref, 0, mod, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.keyPattern' is the wrong type '%s', expected type 'object'", typeName(ev.Type))
			}
			if err := bson.Unmarshal(kd, &ref.KeyPattern); err != nil {
				return ref, 0, mod, mongoerr.New(mongoerr.InvalidBSON, "keyPattern: %v", err)
			}
		case "expireAfterSeconds":
			f, ok := numberValue(ev)
			if !ok {
				return ref, 0, mod, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'", typeName(ev.Type))
			}
			if f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
				return ref, 0, mod, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
			}
			secs = int64(f)
		case "hidden", "prepareUnique", "unique", "forceNonUnique":
			b, ok := ev.BooleanOK()
			if !ok {
				return ref, 0, mod, mongoerr.New(mongoerr.TypeMismatch, "BSON field 'collMod.index.%s' is the wrong type '%s', expected type 'bool'", k, typeName(ev.Type))
			}
			switch k {
			case "hidden":
				mod.Hidden = &b
			case "prepareUnique":
				mod.PrepareUnique = &b
			case "unique":
				if !b {
					return ref, 0, mod, mongoerr.New(mongoerr.BadValue, "'Unique: false' option is not supported")
				}
				mod.Unique = true
			case "forceNonUnique":
				if !b {
					return ref, 0, mod, mongoerr.New(mongoerr.BadValue, "'forceNonUnique: false' option is not supported")
				}
				mod.ForceNonUnique = true
			}
		default:
			return ref, 0, mod, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'collMod.index.%s' is an unknown field.", e.Key())
		}
	}
	switch {
	case ref.Name == "" && ref.KeyPattern == nil:
		return ref, 0, mod, mongoerr.New(mongoerr.InvalidOptions, "must specify either index name or key pattern")
	case ref.Name != "" && ref.KeyPattern != nil:
		return ref, 0, mod, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both key pattern and name.")
	case secs < 0 && mod == (store.IndexMod{}):
		return ref, 0, mod, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds, hidden, prepareUnique, unique or forceNonUnique field")
	case mod.Unique && mod.ForceNonUnique:
		return ref, 0, mod, mongoerr.New(mongoerr.InvalidOptions, "collMod does not support 'unique' and 'forceNonUnique' together")
	}
	return ref, secs, mod, nil
}

func numberValue(v bson.RawValue) (float64, bool) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble:
		return v.AsFloat64(), true
	}
	return 0, false
}
