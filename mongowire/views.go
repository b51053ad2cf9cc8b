package mongowire

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// Views are kept by the store (store/view.go), which runs their pipeline
// for find, count, distinct and aggregate. Here: their listCollections
// entry and the refusal of writes, as mongod's.

// viewWriteCommands are the commands refused on a view.
var viewWriteCommands = map[string]bool{
	"insert": true, "update": true, "delete": true, "findAndModify": true,
	"createIndexes": true, "dropIndexes": true,
}

// refuseViewWrite refuses a write to a view: 166 CommandNotSupportedOnView.
func (s *Server) refuseViewWrite(r *request) error {
	if !viewWriteCommands[r.name] {
		return nil
	}
	coll, ok := r.cmd.Index(0).Value().StringValueOK()
	if !ok {
		return nil
	}
	ns := store.Namespace{DB: r.db, Coll: coll}
	if s.rawStore.IsView(ns) {
		return mongoerr.New(166, "Namespace %s is a view, not a collection", ns)
	}
	return nil
}

// viewListing is a view's listCollections entry: {name, type: "view",
// options: {viewOn, pipeline}, info: {readOnly: true}}.
func viewListing(name string, options bson.D) bson.D {
	opts := bson.D{}
	for _, o := range options {
		if o.Key == "viewOn" || o.Key == "pipeline" || o.Key == "collation" {
			opts = append(opts, o)
		}
	}
	return bson.D{
		{Key: "name", Value: name},
		{Key: "type", Value: "view"},
		{Key: "options", Value: opts},
		{Key: "info", Value: bson.D{{Key: "readOnly", Value: true}}},
	}
}
