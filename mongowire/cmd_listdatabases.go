package mongowire

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// cmdListDatabases: {listDatabases: 1, nameOnly, filter} ->
// {databases: [{name, sizeOnDisk, empty}], totalSize, totalSizeMb}.
func (s *Server) cmdListDatabases(_ context.Context, c *conn, r *request) (bson.D, error) {
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
	for _, info := range s.store.ListDatabases() {
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
