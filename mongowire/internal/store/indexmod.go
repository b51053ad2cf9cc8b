package store

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Index changes of collMod besides expireAfterSeconds (ttl.go): hiding an
// index from the planner, and mongod's two-step conversion of an index to
// unique — prepareUnique makes it refuse new duplicates, then unique
// converts it once no duplicates are left; forceNonUnique converts back.

// codeCannotConvertIndexToUnique is mongod's CannotConvertIndexToUnique.
const codeCannotConvertIndexToUnique int32 = 359

// IndexMod is one collMod index change; nil fields are left alone.
type IndexMod struct {
	Hidden         *bool
	PrepareUnique  *bool
	Unique         bool // convert to unique (needs prepareUnique first)
	ForceNonUnique bool // convert to non-unique
	DryRun         bool // with Unique: only check for duplicates
}

// IndexModResult holds the values before and after, for collMod's reply
// (hidden_old, hidden_new, ...).
type IndexModResult struct {
	HiddenOld, HiddenNew               bool
	PrepareUniqueOld, PrepareUniqueNew bool
}

// hidden reports whether the planner must leave the index alone.
func (ix *index) hidden() bool { return optionTrue(ix.spec.Options, "hidden") }

// prepared reports whether the index refuses new duplicates.
func (ix *index) prepared() bool { return optionTrue(ix.spec.Options, "prepareUnique") }

func optionTrue(opts bson.D, key string) bool {
	for _, o := range opts {
		if o.Key == key {
			v, _ := rawOption(o.Value)
			return truthy(v)
		}
	}
	return false
}

// setOption sets key in a copy of opts (false: removes it, as mongod
// lists only true flags).
func setOption(opts bson.D, key string, on bool) bson.D {
	out := slices.DeleteFunc(append(bson.D{}, opts...), func(e bson.E) bool { return e.Key == key })
	if on {
		out = append(out, bson.E{Key: key, Value: true})
	}
	return out
}

// CollModIndex applies an index change of collMod, recorded as a modify
// entry {index: {name, <field>: value...}} that a restart replays.
func (s *Store) CollModIndex(ns Namespace, ref IndexRef, mod IndexMod) (res IndexModResult, err error) {
	err = s.write(func(t *tx) error {
		c := s.collLocked(ns)
		if c == nil {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s", ns)
		}
		if err := refuseViewLocked(ns, c); err != nil {
			return err
		}
		ix := c.indexByRef(ref)
		if ix == nil {
			return mongoerr.New(mongoerr.IndexNotFound, "cannot find index %v for ns %s", refString(ref), ns)
		}
		if ix == c.indexes[0] && (mod.Hidden != nil || mod.PrepareUnique != nil || mod.Unique || mod.ForceNonUnique) {
			return mongoerr.New(mongoerr.BadValue, "cannot modify the _id index")
		}
		res.HiddenOld, res.PrepareUniqueOld = ix.hidden(), ix.prepared()
		res.HiddenNew, res.PrepareUniqueNew = res.HiddenOld, res.PrepareUniqueOld
		if mod.Unique && !ix.unique() {
			if !ix.prepared() {
				return mongoerr.New(mongoerr.InvalidOptions, "Cannot make index unique with 'unique: true' without first setting 'prepareUnique: true'")
			}
			if v := c.duplicates(ix); len(v) > 0 {
				e := mongoerr.New(codeCannotConvertIndexToUnique, "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.")
				e.Info = bson.D{{Key: "violations", Value: v}}
				return e
			}
			if mod.DryRun {
				return nil
			}
		}
		spec := ix.spec
		change := bson.D{{Key: "name", Value: spec.Name}}
		if mod.Hidden != nil {
			spec.Options = setOption(spec.Options, "hidden", *mod.Hidden)
			res.HiddenNew = *mod.Hidden
			change = append(change, bson.E{Key: "hidden", Value: *mod.Hidden})
		}
		if mod.PrepareUnique != nil {
			spec.Options = setOption(spec.Options, "prepareUnique", *mod.PrepareUnique)
			res.PrepareUniqueNew = *mod.PrepareUnique
			change = append(change, bson.E{Key: "prepareUnique", Value: *mod.PrepareUnique})
		}
		if mod.Unique {
			spec.Unique = true
			spec.Options = setOption(spec.Options, "prepareUnique", false)
			change = append(change, bson.E{Key: "unique", Value: true})
		}
		if mod.ForceNonUnique {
			spec.Unique = false
			change = append(change, bson.E{Key: "forceNonUnique", Value: true})
		}
		ix.spec = spec
		t.emit(OplogEntry{Op: "modify", NS: ns, UUID: c.info.UUID, Extra: bson.D{{Key: "index", Value: change}}})
		return nil
	})
	return res, err
}

// indexByRef finds an index by name or key pattern.
func (c *collection) indexByRef(ref IndexRef) *index {
	for _, x := range c.indexes {
		if (ref.Name != "" && x.spec.Name == ref.Name) || (ref.Name == "" && sameKey(x.spec.Key, ref.KeyPattern)) {
			return x
		}
	}
	return nil
}

// duplicates lists, as mongod's violations, the _ids of the documents
// sharing each key of ix held by more than one document.
func (c *collection) duplicates(ix *index) bson.A {
	var out bson.A
	var group []uint64
	var prev *entry
	flush := func() {
		if len(group) > 1 {
			ids := bson.A{}
			for _, rid := range group {
				if p := c.pos(rid); p >= 0 {
					ids = append(ids, idOf(c.recs[p].doc))
				}
			}
			out = append(out, bson.D{{Key: "ids", Value: ids}})
		}
		group = group[:0]
	}
	ix.tree.ascend(nil, func(e *entry) bool {
		if prev != nil && ix.compareKeys(prev, e) != 0 {
			flush()
		}
		group = append(group, e.rid)
		prev = e
		return true
	})
	flush()
	return out
}

// applyIndexChangeLocked redoes the non-TTL fields of a journaled index
// modify entry.
func applyIndexChangeLocked(ix *index, d bson.Raw) {
	spec := ix.spec
	elems, _ := d.Elements()
	for _, e := range elems {
		on := truthy(e.Value())
		switch e.Key() {
		case "hidden", "prepareUnique":
			spec.Options = setOption(spec.Options, e.Key(), on)
		case "unique":
			spec.Unique = true
			spec.Options = setOption(spec.Options, "prepareUnique", false)
		case "forceNonUnique":
			spec.Unique = false
		}
	}
	ix.spec = spec
}
