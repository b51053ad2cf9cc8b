package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdDBStats: {dbStats: 1} -> {db, collections, views, objects,
// avgObjSize, dataSize, storageSize, indexes, indexSize, totalSize,
// scaleFactor}, as mongosh's db.stats() shows them. Sizes are the store's.
func (s *Server) cmdDBStats(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	var objects, indexes, size int64
	colls := s.data(ctx).ListCollections(r.db)
	for _, info := range colls {
		ns := store.Namespace{DB: r.db, Coll: info.Name}
		n, err := s.data(ctx).Count(ns, nil, 0, 0)
		if err != nil {
			return nil, err
		}
		objects += n
		if specs, err := s.data(ctx).ListIndexes(ns); err == nil {
			indexes += int64(len(specs))
		}
	}
	for _, db := range s.data(ctx).ListDatabases() {
		if db.Name == r.db {
			size = db.SizeOnDisk
		}
	}
	avg := 0.0
	if objects > 0 {
		avg = float64(size) / float64(objects)
	}
	return bson.D{
		{Key: "db", Value: r.db},
		{Key: "collections", Value: int64(len(colls))},
		{Key: "views", Value: int64(0)},
		{Key: "objects", Value: objects},
		{Key: "avgObjSize", Value: avg},
		{Key: "dataSize", Value: float64(size)},
		{Key: "storageSize", Value: float64(size)},
		{Key: "indexes", Value: indexes},
		{Key: "indexSize", Value: 0.0},
		{Key: "totalSize", Value: float64(size)},
		{Key: "scaleFactor", Value: int64(1)},
	}, nil
}
