package mongowire_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
)

// BenchmarkTransaction compares, with 4 clients, one transaction of 10
// inserts (txn10) against 10 plain inserts (plain10); one op is the 10
// inserts. TIDE_BENCH_URI runs it against another server (for instance
// an older build's tide serve, to compare plain10 before and after).
//
//	go test ./mongowire -run '^$' -bench 'BenchmarkTransaction' -benchtime 2000x -count 3
func BenchmarkTransaction(b *testing.B) {
	uri := os.Getenv("TIDE_BENCH_URI")
	if uri == "" {
		uri = testenv.MongoWire(b).URI()
	}
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	ctx := context.Background()
	var seq atomic.Int64
	seq.Store(time.Now().UnixNano()) // fresh _ids against a server that ran this before
	doc := func() bson.D {
		return bson.D{{Key: "_id", Value: seq.Add(1)}, {Key: "s", Value: "some text payload"}}
	}
	b.Run("plain10", func(b *testing.B) {
		coll := c.Database("bench").Collection("plain")
		parallel(b, func() error {
			for range 10 {
				if _, err := coll.InsertOne(ctx, doc()); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("txn10", func(b *testing.B) {
		coll := c.Database("bench").Collection("txn")
		if _, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: int64(-1)}}, bson.D{}, options.Replace().SetUpsert(true)); err != nil { // created outside
			b.Fatal(err)
		}
		parallel(b, func() error {
			s, err := c.StartSession()
			if err != nil {
				return err
			}
			defer s.EndSession(ctx)
			_, err = s.WithTransaction(ctx, func(sc context.Context) (any, error) {
				for range 10 {
					if _, err := coll.InsertOne(sc, doc()); err != nil {
						return nil, err
					}
				}
				return nil, nil
			})
			return err
		})
	})
}
