package mongowire

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
	"github.com/tide-cdc/tide/mongowire/internal/store"
)

// cmdListDatabases: {listDatabases: 1, nameOnly, filter} ->
// {databases: [{name, sizeOnDisk, empty}], totalSize, totalSizeMb}.
func (s *Server) cmdListDatabases(ctx context.Context, c *conn, r *request) (bson.D, error) {
	a := newArgs(r)
	nameOnly := a.bool("nameOnly")
	filter := a.doc("filter")
	if a.err != nil {
		return nil, a.err
	}
	f, err := mql.CompileFilter(filter)
	if err != nil {
		return nil, err
	}
	var (
		dbs   bson.A
		total int64
	)
	// With auth on, a user without the listDatabases action sees the
	// databases it has privileges on, as mongod's authorizedDatabases.
	var only *privileges
	if p := s.privilegesOf(c); s.cfg.Auth && !p.onCluster(actListDatabases) {
		only = p
	}
	for _, info := range withLocal(s.data(ctx).ListDatabases(), s.data(ctx).Oplog()) {
		if only != nil && !only.anyOn(info.Name) {
			continue
		}
		d := bson.D{{Key: "name", Value: info.Name}}
		if !nameOnly {
			d = append(d, bson.E{Key: "sizeOnDisk", Value: info.SizeOnDisk}, bson.E{Key: "empty", Value: info.Empty})
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("encode database %s: %w", info.Name, err)
		}
		if filter != nil && !f.Match(raw) {
			continue
		}
		dbs = append(dbs, bson.Raw(raw))
		total += info.SizeOnDisk
	}
	if dbs == nil {
		dbs = bson.A{}
	}
	reply := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		reply = append(reply, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return reply, nil
}

// withLocal adds the local database, which mongod always lists: here it
// holds the oplog even when no one created a collection in it.
func withLocal(dbs []store.DatabaseInfo, o *store.Oplog) []store.DatabaseInfo {
	_, size, _ := o.Stats()
	i := sort.Search(len(dbs), func(i int) bool { return dbs[i].Name >= "local" })
	if i < len(dbs) && dbs[i].Name == "local" {
		dbs[i].SizeOnDisk += size
		dbs[i].Empty = false
		return dbs
	}
	return slices.Insert(dbs, i, store.DatabaseInfo{Name: "local", SizeOnDisk: size})
}
