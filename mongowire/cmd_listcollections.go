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
	var local []collListing
	local = s.renderedListings(r.db) // local_db.go
	emit := func(name string, full bson.D) error {
		raw, err := bson.Marshal(full)
		if err != nil {
			return fmt.Errorf("encode collection %s: %w", name, err)
		}
		if filter != nil && !f.Match(raw) {
			return nil
		}
		if nameOnly {
			if raw, err = bson.Marshal(full[:2]); err != nil {
				return fmt.Errorf("encode collection %s: %w", name, err)
			}
		}
		docs = append(docs, raw)
		return nil
	}
	for _, info := range s.data(ctx).ListCollections(r.db) {
		for len(local) > 0 && local[0].name < info.Name {
			if err := emit(local[0].name, local[0].doc); err != nil {
				return nil, err
			}
			local = local[1:]
		}
		if len(local) > 0 && local[0].name == info.Name {
			local = local[1:] // a user's collection of that name shadows it
		}
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
		switch {
		case info.View:
			full = viewListing(info.Name, options) // views.go
		case info.Timeseries: // as mongod 7.0 lists one: no uuid, no idIndex
			full = bson.D{
				{Key: "name", Value: info.Name},
				{Key: "type", Value: "timeseries"},
				{Key: "options", Value: options},
				{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}}},
			}
		case info.TimeseriesBuckets || info.Clustered():
			full = full[:4] // mongod lists the clusteredIndex option, no idIndex
		}
		if err := emit(info.Name, full); err != nil {
			return nil, err
		}
	}
	for _, l := range local {
		if err := emit(l.name, l.doc); err != nil {
			return nil, err
		}
	}
	return s.openCursor(ctx, r.db+".$cmd.listCollections", &sliceSource{docs: docs}, cursorOptions{batchSize: batch})
}
