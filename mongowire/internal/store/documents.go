package store

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/mongowire/internal/mql"
)

// AggregateDocs runs a pipeline over the given documents instead of a
// collection's ($documents); $lookup and $unionWith read the collections
// of db. The run is held to lim.
func (s *Store) AggregateDocs(db string, stages []bson.Raw, input []bson.Raw, lim mql.Limits) ([]bson.Raw, error) {
	p, err := mql.CompilePipeline(stages)
	if err != nil {
		return nil, err
	}
	return p.RunLimited(env{s: s, db: db}, input, lim)
}
