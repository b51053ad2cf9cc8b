package store

import (
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/internal/faultfs"
	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
)

// Namespace names a collection: database and collection name.
type Namespace struct{ DB, Coll string }

// String returns "db.coll".
func (ns Namespace) String() string { return ns.DB + "." + ns.Coll }

// Config configures a Store.
type Config struct {
	Dir               string        // "" = in memory; otherwise data persists here across restarts
	OplogBytes        int64         // oplog bound in bytes; 0 = 256 MiB
	OplogMinRetention time.Duration // keep entries at least this long even past OplogBytes; 0 = none
	// NoopInterval is how long the cluster time may stand still: after
	// that long without a write, the clock advances and change-stream
	// waiters wake, as a replica set's periodic no-op writer does, so that
	// an idle change stream's postBatchResumeToken keeps moving. 0 means
	// 10 s (MongoDB's periodicNoopIntervalSecs); negative disables it.
	NoopInterval time.Duration
	// SyncInterval is how often the background syncer fsyncs the journal
	// (only with Dir). 0 means 100 ms, MongoDB's journal commit interval;
	// negative disables it, leaving WaitDurable and Close to sync.
	SyncInterval time.Duration
	// TTLInterval is how often the TTL monitor deletes expired documents
	// (ttl.go). 0 means 60 s, mongod's ttlMonitorSleepSecs; negative
	// disables it (ExpireTTL still runs a pass).
	TTLInterval time.Duration
	Logger      *slog.Logger
	// FS writes the files of Dir; nil is the real file system. Tests pass
	// a *faultfs.Disk to cut the power under the store.
	FS faultfs.FS
}

// CollectionInfo describes a collection.
type CollectionInfo struct {
	Name             string
	UUID             bson.Binary // subtype 4
	Options          bson.D      // as given to create, e.g. changeStreamPreAndPostImages
	PreAndPostImages bool
	View             bool // a view: Options hold viewOn and pipeline; no UUID
	Timeseries       bool // a time-series collection: Options hold timeseries
	// TimeseriesBuckets marks the system.buckets.<name> entry that
	// ListCollections adds for each time-series collection.
	TimeseriesBuckets bool
}

// DatabaseInfo describes a database.
type DatabaseInfo struct {
	Name       string
	SizeOnDisk int64
	Empty      bool
}

// IndexSpec describes an index.
type IndexSpec struct {
	Name    string
	Key     bson.D
	Unique  bool
	Sparse  bool
	Options bson.D // other fields, echoed by listIndexes
}

// WriteError is the failure of one document of a batch write.
type WriteError struct {
	Index int
	Err   *mongoerr.Error
}

// UpdateSpec is one update statement.
type UpdateSpec struct {
	Filter        bson.Raw
	Update        bson.RawValue
	ArrayFilters  []bson.Raw
	Upsert, Multi bool
	// BypassValidation skips the collection's validator (bypassDocumentValidation).
	BypassValidation bool
	Collation        bson.RawValue // as in FindSpec
}

// DeleteSpec is one delete statement: Limit 0 deletes every matching
// document, 1 the first.
type DeleteSpec struct {
	Filter    bson.Raw
	Limit     int
	Collation bson.RawValue // as in FindSpec
}

// UpdateResult is the outcome of one update statement.
type UpdateResult struct {
	Matched, Modified int
	UpsertedID        bson.RawValue // Type 0 when none
}

// FindAndModifySpec is a findAndModify command.
type FindAndModifySpec struct {
	Filter, Sort, Fields bson.Raw
	Update               bson.RawValue
	Remove, New, Upsert  bool
	ArrayFilters         []bson.Raw
	BypassValidation     bool          // bypassDocumentValidation
	Collation            bson.RawValue // as in FindSpec
}

// FindAndModifyResult is the outcome of a findAndModify.
type FindAndModifyResult struct {
	Value           bson.Raw // nil = null
	N               int
	UpdatedExisting bool
	Upserted        bson.RawValue
}

// FindSpec is a query.
type FindSpec struct {
	Filter, Sort, Projection bson.Raw
	Skip, Limit              int64
	// Collation is the command's collation document; absent (Type 0),
	// the collection's default applies.
	Collation bson.RawValue
}

// OplogEntry records one write. Extra holds the details of DDL entries:
//
//	create         {options: {<options as given to create>}}
//	rename         {to: "db.coll", dropTarget: <UUID of the dropped target, only if one was dropped>}
//	createIndexes  {indexes: [{v: 2, key, name, unique?, sparse?, <other options>}]}  (one entry per index)
//	dropIndexes    {indexes: [<the dropped index, same shape>]}  (one entry per index)
//	modify         {<collMod options as given>, stateBeforeChange: {collectionOptions: {<options before>}}}
//
// drop and dropDatabase have none; dropDatabase is preceded by a drop entry
// for each of its collections. Entries and everything they hold are shared
// and must not be modified.
type OplogEntry struct {
	TS     bson.Timestamp
	Wall   time.Time
	Op     string // "insert","update","replace","delete","create","drop","rename","dropDatabase","createIndexes","dropIndexes","modify"
	NS     Namespace
	UUID   bson.Binary        // collection UUID (empty for dropDatabase)
	DocKey bson.Raw           // {_id: ...} for document ops
	Doc    bson.Raw           // insert: the document; replace and update: the post-image
	Pre    bson.Raw           // update/replace/delete: the pre-image, only with changeStreamPreAndPostImages
	Update *UpdateDescription // update only
	Extra  bson.D             // DDL details
	Size   int                // bytes charged against the oplog bound

	Txn *TxnInfo // set on the entries of a multi-document transaction
}

// TxnInfo places an oplog entry in its transaction. A transaction's
// entries share the commit's TS and are numbered from 0 in statement
// order; the last one is marked, so that replay applies a transaction
// whole or not at all.
type TxnInfo struct {
	LSID    bson.Raw // the session, {id: UUID, ...}
	Number  int64
	OpIndex int
	Last    bool
}

// UpdateDescription is the delta of an update, as change streams report it.
// UpdatedFields values are bson.RawValue. DisambiguatedPaths is nil unless
// some path has a numeric-looking or dotted field name; then it maps those
// paths to their components (array indexes as int32).
type UpdateDescription struct {
	UpdatedFields      bson.D
	RemovedFields      []string
	TruncatedArrays    []TruncatedArray
	DisambiguatedPaths bson.D
}

// TruncatedArray is an array that shrank.
type TruncatedArray struct {
	Field   string
	NewSize int32
}
