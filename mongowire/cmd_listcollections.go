package mongowire

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

var idIndex = bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}

// cmdListCollections: {listCollections: 1, filter, nameOnly} -> cursor of
// {name, type, options, info: {readOnly, uuid}, idIndex}.
func (s *Server) cmdListCollections(ctx context.Context, _ *conn, r *request) (bson.D, error) {
	if err := validDB(r.db); err != nil {
		return nil, err
	}
	a := newArgs(r)
	nameOnly := a.bool("nameOnly")
	filter := a.doc("filter")
	if a.err != nil {
		return nil, a.err
	}
	batch, err := cursorArg(r)
	if err != nil {
		return nil, err
	}
	f, err := mql.CompileFilter(filter)
	if err != nil {
		return nil, err
	}
	var docs []bson.Raw
	for _, info := range s.store.ListCollections(r.db) {
		options := info.Options
		if options == nil {
			options = bson.D{}
		}
		full := bson.D{
			{Key: "name", Value: info.Name},
			{Key: "type", Value: "collection"},
			{Key: "options", Value: options},
			{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: info.UUID}}},
			{Key: "idIndex", Value: idIndex},
		}
		if info.View {
			full = viewListing(info.Name, options) // views.go
		} else if info.Clustered() {
			full = full[:4] // mongod lists the clusteredIndex option, no idIndex
		}
		raw, err := bson.Marshal(full)
		if err != nil {
			return nil, fmt.Errorf("encode collection %s: %w", info.Name, err)
		}
		if filter != nil && !f.Match(raw) {
			continue
		}
		if nameOnly {
			if raw, err = bson.Marshal(full[:2]); err != nil {
				return nil, fmt.Errorf("encode collection %s: %w", info.Name, err)
			}
		}
		docs = append(docs, raw)
	}
	return s.openCursor(ctx, r.db+".$cmd.listCollections", &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
}
