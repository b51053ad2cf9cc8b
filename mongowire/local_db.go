package mongowire

import (
	"context"
	"crypto/sha256"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// The local database holds, as on mongod, the oplog (local.oplog.rs, a
// capped collection rendered from the store's oplog, cmd_oplog.go) and
// the replica set config (local.system.replset). They are listed so that
// tools that look for them before reading them (mongosh's
// rs.printReplicationInfo, mongodump --oplog) find them.
var replsetNS = store.Namespace{DB: "local", Coll: "system.replset"}

// versionNS is admin.system.version: the feature compatibility version
// and the auth schema version, which mongodump dumps and mongorestore
// reads before it restores users.
var versionNS = store.Namespace{DB: "admin", Coll: "system.version"}

// staticDocs returns the documents of a collection this server renders
// from its own state (system.replset, system.version), and whether ns
// is one.
func (s *Server) staticDocs(ctx context.Context, ns store.Namespace) ([]bson.Raw, bool) {
	var docs []bson.D
	switch ns {
	case replsetNS:
		docs = []bson.D{s.replSetConfig(ctx)}
	case versionNS:
		docs = []bson.D{
			{{Key: "_id", Value: "featureCompatibilityVersion"}, {Key: "version", Value: "7.0"}},
			{{Key: "_id", Value: "authSchema"}, {Key: "currentVersion", Value: int32(5)}},
		}
	default:
		return nil, false
	}
	out := make([]bson.Raw, len(docs))
	for i, d := range docs {
		out[i] = mustMarshal(d)
	}
	return out, true
}

// localUUID is a stable UUID for a collection this server renders: the
// same name on the same replica set always has the same one.
func (s *Server) localUUID(name string) bson.Binary {
	id := s.rawStore.ReplicaSetID()
	h := sha256.Sum256(append(id[:], name...))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: bson.TypeBinaryUUID, Data: b}
}

// renderedListings are the listCollections entries of the collections of
// db this server renders, sorted by name.
func (s *Server) renderedListings(db string) []collListing {
	switch db {
	case "local":
		return s.localListings()
	case "admin":
		return []collListing{{name: versionNS.Coll, doc: bson.D{
			{Key: "name", Value: versionNS.Coll},
			{Key: "type", Value: "collection"},
			{Key: "options", Value: bson.D{}},
			{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: s.localUUID(versionNS.String())}}},
			{Key: "idIndex", Value: idIndex},
		}}}
	}
	return nil
}

func (s *Server) localListings() []collListing {
	_, _, maxBytes := s.rawStore.Oplog().Stats()
	return []collListing{
		{name: oplogNS.Coll, doc: bson.D{
			{Key: "name", Value: oplogNS.Coll},
			{Key: "type", Value: "collection"},
			{Key: "options", Value: bson.D{{Key: "capped", Value: true}, {Key: "size", Value: maxBytes}, {Key: "autoIndexId", Value: false}}},
			{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: s.localUUID(oplogNS.Coll)}}},
		}},
		{name: replsetNS.Coll, doc: bson.D{
			{Key: "name", Value: replsetNS.Coll},
			{Key: "type", Value: "collection"},
			{Key: "options", Value: bson.D{}},
			{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: s.localUUID(replsetNS.Coll)}}},
			{Key: "idIndex", Value: idIndex},
		}},
	}
}

type collListing struct {
	name string
	doc  bson.D
}

// oplogStats is storageStats for local.oplog.rs.
func (s *Server) oplogStats(scale int64) bson.D {
	n, size, maxBytes := s.rawStore.Oplog().Stats()
	var avg int64
	if n > 0 {
		avg = size / int64(n)
	}
	return bson.D{
		{Key: "size", Value: appendNumber(size / scale)},
		{Key: "count", Value: appendNumber(int64(n))},
		{Key: "avgObjSize", Value: appendNumber(avg)},
		{Key: "numOrphanDocs", Value: appendNumber(int64(0))},
		{Key: "storageSize", Value: appendNumber(size / scale)},
		{Key: "freeStorageSize", Value: appendNumber(int64(0))},
		{Key: "capped", Value: true},
		{Key: "max", Value: appendNumber(int64(0))},
		{Key: "maxSize", Value: appendNumber(maxBytes / scale)},
		{Key: "nindexes", Value: int32(0)},
		{Key: "indexBuilds", Value: bson.A{}},
		{Key: "totalIndexSize", Value: appendNumber(int64(0))},
		{Key: "totalSize", Value: appendNumber(size / scale)},
		{Key: "indexSizes", Value: bson.D{}},
		{Key: "scaleFactor", Value: appendNumber(scale)},
	}
}
