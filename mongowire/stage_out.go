package mongowire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// writeStage returns the name of a pipeline's $out or $merge stage ("" if
// none), and refuses one that is not the last stage (40601), as mongod.
func writeStage(stages []bson.Raw) (string, error) {
	for i, st := range stages {
		if e, err := st.IndexErr(0); err == nil && (e.Key() == "$out" || e.Key() == "$merge") {
			if i != len(stages)-1 {
				return "", mongoerr.New(40601, "%s can only be the final stage in the pipeline", e.Key())
			}
			return e.Key(), nil
		}
	}
	return "", nil
}

// outTarget reads $out's target: a collection name in the source's
// database, or {db, coll}.
func outTarget(db string, v bson.RawValue) (store.Namespace, error) {
	var to store.Namespace
	switch v.Type {
	case bson.TypeString:
		to = store.Namespace{DB: db, Coll: v.StringValue()}
	case bson.TypeEmbeddedDocument:
		d := v.Document()
		to.DB, _ = d.Lookup("db").StringValueOK()
		to.Coll, _ = d.Lookup("coll").StringValueOK()
		if to.DB == "" || to.Coll == "" {
			return to, mongoerr.New(mongoerr.FailedToParse, "If an object is passed to $out it must have exactly 2 fields: 'db' and 'coll'")
		}
	default:
		return to, mongoerr.New(mongoerr.FailedToParse, "$out only supports a string or object argument, but found %s", typeName(v.Type))
	}
	if err := validDB(to.DB); err != nil {
		return to, err
	}
	if strings.HasPrefix(to.Coll, "system.") || strings.ContainsAny(to.Coll, "$\x00") || strings.HasPrefix(to.Coll, ".") || strings.HasSuffix(to.Coll, ".") {
		return to, mongoerr.New(mongoerr.InvalidNamespace, "Invalid $out target namespace, %s", to)
	}
	return to, nil
}

// runOut runs a pipeline ending in $out: the results go into a temporary
// collection of the target database, which takes the existing target's
// secondary indexes and then replaces it in one rename, so that readers
// see the old contents or the new ones, never a mix, and a failure (a
// duplicate _id, an index violation) leaves the target as it was.
func (s *Server) runOut(ctx context.Context, db string, docs []bson.Raw, last bson.Raw, bypass bool) error {
	to, err := outTarget(db, last.Index(0).Value())
	if err != nil {
		return err
	}
	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := store.Namespace{DB: to.DB, Coll: "tmp.agg_out." + hex.EncodeToString(suffix[:])}
	// The target's validator carries over, and checks what $out writes
	// unless the aggregate bypasses it, as mongod's $out does.
	var keep bson.D
	for _, info := range s.data(ctx).ListCollections(to.DB) {
		if info.Name != to.Coll {
			continue
		}
		for _, o := range info.Options {
			if o.Key == "validator" || o.Key == "validationLevel" || o.Key == "validationAction" {
				keep = append(keep, o)
			}
		}
	}
	if err := s.data(ctx).Create(tmp, keep); err != nil {
		return err
	}
	fail := func(err error) error {
		s.data(ctx).Drop(tmp)
		return err
	}
	if len(docs) > 0 {
		if _, errs := s.data(ctx).InsertWith(tmp, docs, store.InsertOptions{Ordered: true, BypassValidation: bypass}); len(errs) > 0 {
			return fail(errs[0].Err)
		}
	}
	if specs, err := s.data(ctx).ListIndexes(to); err == nil {
		var secondary []store.IndexSpec
		for _, sp := range specs {
			if sp.Name != "_id_" {
				secondary = append(secondary, sp)
			}
		}
		if len(secondary) > 0 {
			if _, _, _, err := s.data(ctx).CreateIndexes(tmp, secondary); err != nil {
				return fail(err)
			}
		}
	}
	if err := s.data(ctx).Rename(tmp, to, true); err != nil {
		return fail(err)
	}
	return nil
}
