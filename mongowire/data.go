package mongowire

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// The one door to the data. A command handler (cmd_*.go, stage_*.go)
// reaches documents, indexes and collections only through Server.data,
// which returns a view: inside a multi-document transaction its reads and
// writes of documents go to the transaction, outside to the store. The
// Server's store field is named rawStore so that no handler uses it by
// habit, and TestHandlersUseTheDoor (door_test.go) fails the build's tests
// if one does. The transaction rule is therefore kept in this file, not
// remembered in every handler.

// dataStore is what a transaction's statements read and write: the
// documents of collections. Both *store.Store and *store.Txn implement it.
type dataStore interface {
	Find(store.Namespace, store.FindSpec) ([]bson.Raw, error)
	Count(ns store.Namespace, filter bson.Raw, skip, limit int64) (int64, error)
	Distinct(ns store.Namespace, key string, filter bson.Raw) ([]bson.RawValue, error)
	Aggregate(store.Namespace, []bson.Raw, mql.Limits) ([]bson.Raw, error)
	InsertWith(ns store.Namespace, docs []bson.Raw, opts store.InsertOptions) (int, []store.WriteError)
	Update(store.Namespace, store.UpdateSpec) (store.UpdateResult, error)
	Delete(ns store.Namespace, filter bson.Raw, limit int) (int, error)
	FindAndModify(store.Namespace, store.FindAndModifySpec) (store.FindAndModifyResult, error)
	// The same under a collation (store.FindSpec.Collation).
	CountWith(store.Namespace, store.FindSpec) (int64, error)
	DistinctWith(ns store.Namespace, key string, spec store.FindSpec) ([]bson.RawValue, error)
	AggregateWith(ns store.Namespace, stages []bson.Raw, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error)
	DeleteWith(store.Namespace, store.DeleteSpec) (int, error)
	CreateIndexes(store.Namespace, []store.IndexSpec) (createdCollection bool, before, after int, err error)
}

// catalog is the store's side of a view: what a transaction never runs.
// A command that uses these is not among txnAllowed (txn.go), so it is
// refused inside a transaction before its handler runs; create in a
// transaction goes to createInTxn instead of cmdCreate.
type catalog interface {
	// The catalogue and the clocks.
	Collection(store.Namespace) (store.CollectionInfo, bool)
	ListIndexes(store.Namespace) ([]store.IndexSpec, error)
	ListCollections(db string) []store.CollectionInfo
	ListDatabases() []store.DatabaseInfo
	Oplog() *store.Oplog
	ClusterTime() bson.Timestamp
	Now() bson.Timestamp
	ReplicaSetID() bson.ObjectID
	OpenTransactions() int
	Explain(store.Namespace, store.FindSpec) (store.Plan, error)
	IsTimeseries(store.Namespace) bool
	// An index walk, for splitVector and dataSize (cmd_split.go).
	WalkKeyRange(ns store.Namespace, r store.KeyRange, fn func(key []bson.RawValue, doc bson.Raw) bool) (store.CollTotals, error)

	// Reads at a cluster time (readConcern snapshot outside a
	// transaction), and pipelines over given documents ($documents,
	// $listLocalSessions, the local database). A $lookup in the latter
	// reads the store even in a transaction: a known gap.
	FindAt(ns store.Namespace, spec store.FindSpec, ts bson.Timestamp) ([]bson.Raw, error)
	AggregateAt(ns store.Namespace, stages []bson.Raw, ts bson.Timestamp, lim mql.Limits) ([]bson.Raw, error)
	DistinctAt(ns store.Namespace, key string, filter bson.Raw, ts bson.Timestamp) ([]bson.RawValue, error)
	AggregateAtWith(ns store.Namespace, stages []bson.Raw, ts bson.Timestamp, lim mql.Limits, collation bson.RawValue) ([]bson.Raw, error)
	DistinctAtWith(ns store.Namespace, key string, spec store.FindSpec, ts bson.Timestamp) ([]bson.RawValue, error)
	AggregateDocs(db string, stages []bson.Raw, input []bson.Raw, lim mql.Limits) ([]bson.Raw, error)

	// DDL.
	Create(ns store.Namespace, options bson.D) error
	CreateWithUUID(ns store.Namespace, options bson.D, uuid bson.Binary) error
	Drop(store.Namespace) (nIndexesWas int, err error)
	DropDatabase(db string) error
	DropIndexes(ns store.Namespace, names []string) (nIndexesWas int, err error)
	Rename(from, to store.Namespace, dropTarget bool) error
	CollMod(ns store.Namespace, options bson.D) error
	CollModTTL(ns store.Namespace, ref store.IndexRef, secs int64) (old float64, had bool, err error)
	CollModIndex(ns store.Namespace, ref store.IndexRef, mod store.IndexMod) (store.IndexModResult, error)
}

// view is a command's one door to the data (Server.data). Its dataStore
// methods go to the command's transaction, if any; its catalog methods go
// to the store.
type view struct {
	dataStore // the transaction, or the store
	catalog   // the store
}

// data returns the command's view of the data: the transaction of ctx's
// statement, if any, else the store.
func (s *Server) data(ctx context.Context) view {
	if x := txnFrom(ctx); x != nil {
		return view{dataStore: x, catalog: s.rawStore}
	}
	return view{dataStore: s.rawStore, catalog: s.rawStore}
}

// outsideTxn returns the store itself, bypassing any transaction, for the
// few handlers that need the whole store rather than documents: the
// change-stream engine, which reads the oplog and the committed version
// of documents whatever the statement that opened it. Only the files in
// TestHandlersUseTheDoor's allow-list may call it.
func (v view) outsideTxn() *store.Store {
	return v.catalog.(*store.Store)
}
