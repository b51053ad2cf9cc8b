package mongowire

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// mergeSpec is a parsed $merge stage.
type mergeSpec struct {
	into           store.Namespace
	on             []string
	whenMatched    string // replace, keepExisting, merge, fail
	whenNotMatched string // insert, discard, fail
}

// parseMerge reads {$merge: "c" | {into, on, whenMatched, whenNotMatched}}
// with mongod's defaults (on _id, merge, insert). A pipeline for
// whenMatched and let are refused.
func parseMerge(db string, v bson.RawValue) (mergeSpec, error) {
	m := mergeSpec{on: []string{"_id"}, whenMatched: "merge", whenNotMatched: "insert"}
	if v.Type == bson.TypeString {
		var err error
		m.into, err = outTarget(db, v)
		return m, err
	}
	d, ok := v.DocumentOK()
	if !ok {
		return m, mongoerr.New(mongoerr.FailedToParse, "$merge requires a string or object argument, but found %s", typeName(v.Type))
	}
	into, err := d.LookupErr("into")
	if err != nil {
		return m, missingField("$merge.into")
	}
	if m.into, err = outTarget(db, into); err != nil {
		return m, err
	}
	elems, _ := d.Elements()
	for _, e := range elems {
		val := e.Value()
		switch e.Key() {
		case "into":
		case "on":
			m.on = nil
			if s, ok := val.StringValueOK(); ok {
				m.on = []string{s}
			} else if arr, ok := val.ArrayOK(); ok {
				vals, _ := arr.Values()
				for _, x := range vals {
					s, ok := x.StringValueOK()
					if !ok {
						return m, mongoerr.New(51134, "$merge 'on' array elements must be strings, but found %s", typeName(x.Type))
					}
					m.on = append(m.on, s)
				}
			}
			if len(m.on) == 0 {
				return m, mongoerr.New(51185, "$merge 'on' must be a string or a non-empty array of strings")
			}
		case "whenMatched":
			s, ok := val.StringValueOK()
			if !ok {
				return m, mongoerr.New(mongoerr.CommandNotSupported, "$merge with a whenMatched pipeline is not supported by this server")
			}
			if s != "replace" && s != "keepExisting" && s != "merge" && s != "fail" {
				return m, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", s)
			}
			m.whenMatched = s
		case "whenNotMatched":
			s, _ := val.StringValueOK()
			if s != "insert" && s != "discard" && s != "fail" {
				return m, mongoerr.New(mongoerr.BadValue, "Enumeration value '%s' for field '$merge.whenNotMatched' is not a valid value.", s)
			}
			m.whenNotMatched = s
		case "let":
			return m, mongoerr.New(mongoerr.CommandNotSupported, "$merge with let is not supported by this server")
		default:
			return m, mongoerr.New(codeUnknownField, "BSON field '$merge.%s' is an unknown field.", e.Key())
		}
	}
	return m, nil
}

// runMerge runs a pipeline ending in $merge, writing each result into the
// target as its whenMatched/whenNotMatched say. Like mongod's, it is not
// atomic: the documents written before a failure stay.
func (s *Server) runMerge(ctx context.Context, db string, docs []bson.Raw, last bson.Raw, bypass bool) error {
	m, err := parseMerge(db, last.Index(0).Value())
	if err != nil {
		return err
	}
	if len(m.on) != 1 || m.on[0] != "_id" {
		if err := s.requireUniqueIndex(ctx, m); err != nil {
			return err
		}
	}
	for _, doc := range docs {
		filter := bson.D{}
		for _, f := range m.on {
			v, err := doc.LookupErr(strings.Split(f, ".")...)
			if err != nil || v.Type == bson.TypeNull || v.Type == bson.TypeUndefined || v.Type == bson.TypeArray {
				return mongoerr.New(51132, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
			}
			filter = append(filter, bson.E{Key: f, Value: v})
		}
		fb, err := bson.Marshal(filter)
		if err != nil {
			return err
		}
		found, err := s.data(ctx).Find(m.into, store.FindSpec{Filter: fb, Limit: 1})
		if err != nil {
			return err
		}
		if len(found) == 0 {
			switch m.whenNotMatched {
			case "insert":
				if _, errs := s.data(ctx).InsertWith(m.into, []bson.Raw{doc}, store.InsertOptions{Ordered: true, BypassValidation: bypass}); len(errs) > 0 {
					return errs[0].Err
				}
			case "fail":
				return &mongoerr.Error{Code: 13113, CodeName: "MergeStageNoMatchingDocument",
					Message: "$merge could not find a matching document in the target collection for at least one document in the source collection"}
			}
			continue
		}
		byID, _ := bson.Marshal(bson.D{{Key: "_id", Value: found[0].Lookup("_id")}})
		var update bson.Raw
		switch m.whenMatched {
		case "keepExisting":
			continue
		case "fail":
			// mongod inserts, and reports the unique index's own error.
			_, errs := s.data(ctx).InsertWith(m.into, []bson.Raw{doc}, store.InsertOptions{Ordered: true, BypassValidation: bypass})
			if len(errs) == 0 { // on is not _id: the match was on another unique key
				return mongoerr.New(mongoerr.DuplicateKey, "$merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error collection: %s", m.into)
			}
			e := *errs[0].Err
			e.Message = "$merge failed due to a DuplicateKey error :: caused by :: " + dupKeyMessage(&e).Message
			return &e
		case "replace":
			update = doc
		case "merge":
			set := bson.D{}
			elems, _ := doc.Elements()
			for _, e := range elems {
				if e.Key() != "_id" {
					set = append(set, bson.E{Key: e.Key(), Value: e.Value()})
				}
			}
			if len(set) == 0 {
				continue
			}
			if update, err = bson.Marshal(bson.D{{Key: "$set", Value: set}}); err != nil {
				return err
			}
		}
		if _, err := s.data(ctx).Update(m.into, store.UpdateSpec{Filter: byID, Update: bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: update}, BypassValidation: bypass}); err != nil {
			return err
		}
	}
	return nil
}

// requireUniqueIndex refuses $merge on fields without a unique index on
// exactly them (51183), as mongod.
func (s *Server) requireUniqueIndex(ctx context.Context, m mergeSpec) error {
	specs, _ := s.data(ctx).ListIndexes(m.into)
	for _, sp := range specs {
		if !sp.Unique || len(sp.Key) != len(m.on) {
			continue
		}
		match := true
		for _, k := range sp.Key {
			found := false
			for _, f := range m.on {
				found = found || f == k.Key
			}
			match = match && found
		}
		if match {
			return nil
		}
	}
	return mongoerr.New(51183, "Cannot find index to verify that join fields will be unique")
}
