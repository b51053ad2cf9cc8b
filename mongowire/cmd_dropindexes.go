package mongowire

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// cmdDropIndexes: {dropIndexes: "c", index: name | keyPattern | "*" | [names]}.
func (s *Server) cmdDropIndexes(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	ns, err := collNS(r)
	if err != nil {
		return nil, err
	}
	v, err := r.cmd.LookupErr("index")
	if err != nil {
		return nil, missingField("dropIndexes.index")
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
		specs, err := s.data(ctx).ListIndexes(ns)
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
	n, err := s.data(ctx).DropIndexes(ns, names)
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
