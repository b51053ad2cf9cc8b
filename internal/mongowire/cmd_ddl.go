package mongowire

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
	"github.com/tide-cdc/tide/internal/mongowire/store"
)

// cmdCreate: {create: "c", ...options} -> {}. The options other than the
// generic command fields go to the store as given.
func (s *Server) cmdCreate(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	if err := s.store.Create(ns, fieldsExcept(r.cmd)); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// cmdDrop: {drop: "c"} -> {nIndexesWas, ns}; a missing collection is not
// an error, as in MongoDB 7.0.
func (s *Server) cmdDrop(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	n, err := s.store.Drop(ns)
	if e, ok := mongoerr.As(err); ok && e.Code == mongoerr.NamespaceNotFound {
		// Since 7.0, dropping a missing collection succeeds.
		return bson.D{{Key: "ns", Value: ns.String()}}, nil
	}
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(n)}, {Key: "ns", Value: ns.String()}}, nil
}

// cmdDropDatabase: {dropDatabase: 1} -> {dropped: "db"}.
func (s *Server) cmdDropDatabase(_ context.Context, _ *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	if err := s.store.DropDatabase(r.db); err != nil {
		return nil, err
	}
	return bson.D{{Key: "dropped", Value: r.db}}, nil
}

// cmdRenameCollection: {renameCollection: "db.a", to: "db.b", dropTarget} on admin.
func (s *Server) cmdRenameCollection(_ context.Context, _ *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	fromS, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok {
		return nil, typeMismatch(r.name, "renameCollection", r.cmd.Index(0).Value(), "string")
	}
	toS, ok := a.string("to")
	if a.err != nil {
		return nil, a.err
	}
	if !ok {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'renameCollection.to' is missing but a required field")
	}
	dropTarget := a.bool("dropTarget")
	if a.err != nil {
		return nil, a.err
	}
	from, err := parseNS(r.name, "source", fromS)
	if err != nil {
		return nil, err
	}
	to, err := parseNS(r.name, "target", toS)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	if err := s.store.Rename(from, to, dropTarget); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// cmdCollMod: {collMod: "c", changeStreamPreAndPostImages: {enabled}, ...} -> {}.
func (s *Server) cmdCollMod(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	if err := s.store.CollMod(ns, fieldsExcept(r.cmd)); err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// cmdCreateIndexes: {createIndexes: "c", indexes: [{key, name, unique, sparse, ...}]}.
func (s *Server) cmdCreateIndexes(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	a := newArgs(r)
	specs := a.docs("indexes")
	if a.err != nil {
		return nil, a.err
	}
	if len(specs) == 0 {
		return nil, mongoerr.New(mongoerr.BadValue, "Must specify at least one index to create")
	}
	out := make([]store.IndexSpec, 0, len(specs))
	for _, raw := range specs {
		spec, err := parseIndexSpec(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	created, before, after, err := s.store.CreateIndexes(ns, out)
	if err != nil {
		return nil, err
	}
	reply := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
		{Key: "createdCollectionAutomatically", Value: created},
		{Key: "commitQuorum", Value: "votingMembers"},
	}
	if before == after {
		reply = append(reply, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return reply, nil
}

func parseIndexSpec(raw bson.Raw) (store.IndexSpec, error) {
	var spec store.IndexSpec
	elems, err := raw.Elements()
	if err != nil {
		return spec, mongoerr.New(mongoerr.InvalidBSON, "index specification: %v", err)
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "key":
			kd, ok := v.DocumentOK()
			if !ok {
				return spec, mongoerr.New(mongoerr.TypeMismatch, "The field 'key' must be an object, but got %s", typeName(v.Type))
			}
			if err := bson.Unmarshal(kd, &spec.Key); err != nil {
				return spec, mongoerr.New(mongoerr.InvalidBSON, "index key: %v", err)
			}
			for _, k := range spec.Key {
				if k.Key == "" {
					return spec, mongoerr.New(mongoerr.CannotCreateIndex, "Error in specification %s :: caused by :: Index keys cannot be an empty field", raw)
				}
			}
		case "name":
			n, ok := v.StringValueOK()
			if !ok {
				return spec, mongoerr.New(mongoerr.TypeMismatch, "The field 'name' must be a string, but got %s", typeName(v.Type))
			}
			spec.Name = n
		case "unique":
			spec.Unique = truthy(v)
		case "sparse":
			spec.Sparse = truthy(v)
		case "v", "ns":
			// The version is ours to choose; ns is legacy.
		default:
			spec.Options = append(spec.Options, bson.E{Key: e.Key(), Value: v})
		}
	}
	if len(spec.Key) == 0 {
		return spec, mongoerr.New(mongoerr.FailedToParse, "Error in specification %s :: caused by :: The 'key' field is a required property of an index specification", raw)
	}
	if spec.Name == "" {
		spec.Name = indexName(spec.Key)
	}
	return spec, nil
}

// indexName is MongoDB's default name: "a_1_b_-1".
func indexName(key bson.D) string {
	var b strings.Builder
	for i, k := range key {
		if i > 0 {
			b.WriteByte('_')
		}
		b.WriteString(k.Key)
		b.WriteByte('_')
		fmt.Fprint(&b, k.Value)
	}
	return b.String()
}

// cmdListIndexes: {listIndexes: "c"} -> cursor of {v: 2, key, name, ...}.
func (s *Server) cmdListIndexes(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	batch, err := cursorArg(r)
	if err != nil {
		return nil, err
	}
	specs, err := s.store.ListIndexes(ns)
	if err != nil {
		return nil, err
	}
	docs := make([]bson.Raw, 0, len(specs))
	for _, spec := range specs {
		d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: spec.Key}, {Key: "name", Value: spec.Name}}
		if spec.Unique {
			d = append(d, bson.E{Key: "unique", Value: true})
		}
		if spec.Sparse {
			d = append(d, bson.E{Key: "sparse", Value: true})
		}
		d = append(d, spec.Options...)
		b, err := bson.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode index %s: %w", spec.Name, err)
		}
		docs = append(docs, b)
	}
	return s.openCursor(ctx, ns.String(), &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
}

// cursorArg reads {cursor: {batchSize}} of listIndexes/listCollections/aggregate.
func cursorArg(r *request) (int64, error) {
	v, err := r.cmd.LookupErr("cursor")
	if err != nil {
		return -1, nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return 0, typeMismatch(r.name, "cursor", v, "object")
	}
	return cursorBatchSize(r.name, d)
}

// cmdDropIndexes: {dropIndexes: "c", index: name | keyPattern | "*" | [names]}.
func (s *Server) cmdDropIndexes(_ context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	v, err := r.cmd.LookupErr("index")
	if err != nil {
		return nil, mongoerr.New(mongoerr.FailedToParse, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	var names []string
	switch v.Type {
	case bson.TypeString:
		names = []string{v.StringValue()}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, n := range vals {
			name, ok := n.StringValueOK()
			if !ok {
				return nil, typeMismatch(r.name, "index", n, "string")
			}
			names = append(names, name)
		}
	case bson.TypeEmbeddedDocument:
		specs, err := s.store.ListIndexes(ns)
		if err != nil {
			return nil, err
		}
		var want bson.D
		if err := bson.Unmarshal(v.Document(), &want); err != nil {
			return nil, mongoerr.New(mongoerr.InvalidBSON, "index key pattern: %v", err)
		}
		for _, spec := range specs {
			if sameKey(spec.Key, want) {
				names = []string{spec.Name}
				break
			}
		}
		if names == nil {
			return nil, mongoerr.New(mongoerr.IndexNotFound, "can't find index with key: %s", v.Document())
		}
	default:
		return nil, typeMismatch(r.name, "index", v, "string, array or object")
	}
	n, err := s.store.DropIndexes(ns, names)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(n)}}, nil
}

func sameKey(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || fmt.Sprint(numeric(a[i].Value)) != fmt.Sprint(numeric(b[i].Value)) {
			return false
		}
	}
	return true
}

func numeric(v any) any {
	switch n := v.(type) {
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v
}
