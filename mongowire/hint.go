package mongowire

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// hintCommands are the reads whose top-level hint names an index.
var hintCommands = map[string]bool{"find": true, "count": true, "distinct": true, "aggregate": true, "findAndModify": true}

// checkHint refuses a hint that names no index of an existing collection,
// as mongod's planner does (2 BadValue); the store plans by itself, so a
// valid hint changes nothing else. A hint by index name (string) or key
// pattern (document) is checked; {$natural: ±1} always stands.
func (s *Server) checkHint(ns store.Namespace, hint bson.RawValue) error {
	if _, ok := s.rawStore.Collection(ns); !ok {
		return nil // mongod answers an empty result for a missing collection
	}
	specs, err := s.rawStore.ListIndexes(ns)
	if err != nil {
		return nil
	}
	// A hidden index is not there for the planner, nor for a hint.
	specs = slices.DeleteFunc(specs, func(sp store.IndexSpec) bool { hidden, _ := lookupOption(sp.Options, "hidden"); return hidden })
	switch hint.Type {
	case bson.TypeString:
		for _, sp := range specs {
			if sp.Name == hint.StringValue() {
				return nil
			}
		}
	case bson.TypeEmbeddedDocument:
		d := hint.Document()
		if e, err := d.IndexErr(0); err != nil || e.Key() == "$natural" {
			return nil
		}
		for _, sp := range specs {
			if sameKeyPattern(sp.Key, d) {
				return nil
			}
		}
	default:
		return nil
	}
	return mongoerr.New(mongoerr.BadValue, "error processing query: ns=%s planner returned error :: caused by :: hint provided does not correspond to an existing index", ns)
}

// sameKeyPattern compares a key pattern with a hint by field names and
// numeric directions (1 and 1.0 and NumberLong(1) are the same key).
func sameKeyPattern(key bson.D, hint bson.Raw) bool {
	elems, err := hint.Elements()
	if err != nil || len(elems) != len(key) {
		return false
	}
	for i, e := range elems {
		if e.Key() != key[i].Key {
			return false
		}
		hv := e.Value()
		kb, err := bson.Marshal(bson.D{{Key: "v", Value: key[i].Value}})
		if err != nil {
			return false
		}
		kv := bson.Raw(kb).Lookup("v")
		if hf, ok := hv.AsFloat64OK(); ok {
			if kf, ok := kv.AsFloat64OK(); !ok || kf != hf {
				return false
			}
			continue
		}
		if !hv.Equal(kv) {
			return false
		}
	}
	return true
}

// commandHint checks the hint of a hinted read command, if any.
func (s *Server) commandHint(r *request) error {
	if !hintCommands[r.name] {
		return nil
	}
	h, err := r.cmd.LookupErr("hint")
	if err != nil {
		return nil
	}
	ns, err := collNS(r)
	if err != nil {
		return nil // the handler reports the namespace
	}
	return s.checkHint(ns, h)
}

// statementHint checks the hint of an update or delete statement.
func (s *Server) statementHint(ns store.Namespace, stmt bson.Raw) error {
	h, err := stmt.LookupErr("hint")
	if err != nil {
		return nil
	}
	return s.checkHint(ns, h)
}
