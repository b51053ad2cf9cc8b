package mongowire_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestCreateIndexesRefusesCollation: an index with a non-simple collation
// fails at createIndexes with the error a query with it gets, instead of
// being built and never usable.
func TestCreateIndexesRefusesCollation(t *testing.T) {
	_, c := setup(t)
	ctx := t.Context()
	coll := c.Database("co").Collection("c")
	fr := &options.Collation{Locale: "fr"}
	_, queryErr := coll.Find(ctx, bson.D{}, options.Find().SetCollation(fr))
	wantCode(t, queryErr, 115, "collation")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetCollation(fr)})
	wantCode(t, err, 115, "collation")
	if err.Error() != queryErr.Error() {
		t.Errorf("createIndexes error %q differs from the query's %q", err, queryErr)
	}
	if names, _ := coll.Indexes().ListSpecifications(ctx); len(names) > 1 {
		t.Fatalf("an index was built: %v", names)
	}
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetCollation(&options.Collation{Locale: "simple"})}); err != nil {
		t.Fatalf("simple collation: %v", err)
	}
}
