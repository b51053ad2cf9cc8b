package store

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/mongowire/mongoerr"
)

var errTODO = mongoerr.New(mongoerr.InternalError, "store: not implemented yet")

// Store is the embedded server's storage engine.
type Store struct{ oplog *Oplog }

// Oplog is the ordered record of every write.
type Oplog struct{}

func Open(cfg Config) (*Store, error)                             { return &Store{oplog: &Oplog{}}, nil }
func (s *Store) Close() error                                     { return nil }
func (s *Store) ReplicaSetID() bson.ObjectID                      { return bson.ObjectID{} }
func (s *Store) ClusterTime() bson.Timestamp                      { return bson.Timestamp{} }
func (s *Store) Now() bson.Timestamp                              { return bson.Timestamp{} }
func (s *Store) ListDatabases() []DatabaseInfo                    { return nil }
func (s *Store) ListCollections(db string) []CollectionInfo       { return nil }
func (s *Store) Collection(ns Namespace) (CollectionInfo, bool)   { return CollectionInfo{}, false }
func (s *Store) Create(ns Namespace, options bson.D) error        { return errTODO }
func (s *Store) Drop(ns Namespace) (int, error)                   { return 0, errTODO }
func (s *Store) DropDatabase(db string) error                     { return errTODO }
func (s *Store) Rename(from, to Namespace, dropTarget bool) error { return errTODO }
func (s *Store) CollMod(ns Namespace, options bson.D) error       { return errTODO }
func (s *Store) CreateIndexes(ns Namespace, specs []IndexSpec) (createdCollection bool, before, after int, err error) {
	return false, 0, 0, errTODO
}
func (s *Store) ListIndexes(ns Namespace) ([]IndexSpec, error)         { return nil, errTODO }
func (s *Store) DropIndexes(ns Namespace, names []string) (int, error) { return 0, errTODO }
func (s *Store) Insert(ns Namespace, docs []bson.Raw, ordered bool) (int, []WriteError) {
	return 0, []WriteError{{Index: 0, Err: errTODO}}
}
func (s *Store) Update(ns Namespace, spec UpdateSpec) (UpdateResult, error) {
	return UpdateResult{}, errTODO
}
func (s *Store) Delete(ns Namespace, filter bson.Raw, limit int) (int, error) { return 0, errTODO }
func (s *Store) FindAndModify(ns Namespace, spec FindAndModifySpec) (FindAndModifyResult, error) {
	return FindAndModifyResult{}, errTODO
}
func (s *Store) Find(ns Namespace, spec FindSpec) ([]bson.Raw, error) { return nil, errTODO }
func (s *Store) Count(ns Namespace, filter bson.Raw, skip, limit int64) (int64, error) {
	return 0, errTODO
}
func (s *Store) Distinct(ns Namespace, key string, filter bson.Raw) ([]bson.RawValue, error) {
	return nil, errTODO
}
func (s *Store) Aggregate(ns Namespace, stages []bson.Raw) ([]bson.Raw, error) { return nil, errTODO }
func (s *Store) Oplog() *Oplog                                                 { return s.oplog }
func (o *Oplog) Oldest() (bson.Timestamp, bool)                                { return bson.Timestamp{}, false }
func (o *Oplog) Newest() bson.Timestamp                                        { return bson.Timestamp{} }
func (o *Oplog) ReadAfter(ts bson.Timestamp, max int, maxBytes int) ([]OplogEntry, bson.Timestamp, bool) {
	return nil, ts, false
}
func (o *Oplog) Changed() <-chan struct{} { c := make(chan struct{}); return c }
