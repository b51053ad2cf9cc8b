package mongowire

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

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
	specs, err := s.data(ctx).ListIndexes(ns)
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
