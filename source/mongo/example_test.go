package mongo_test

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/mongowire"
	mongosource "github.com/tide-cdc/tide/source/mongo"
)

// The source reads the change stream of one collection: here of the
// embedded server, started in process.
func Example() {
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"})
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		panic(err)
	}
	defer client.Disconnect(context.Background())
	if err := client.Database("shop").CreateCollection(ctx, "orders"); err != nil {
		panic(err)
	}

	src := mongosource.New(mongosource.Config{URI: srv.URI(), Database: "shop", Collection: "orders", Snapshot: "never"})
	if err := src.Open(ctx, nil); err != nil {
		panic(err)
	}
	defer src.Close()
	if _, err := client.Database("shop").Collection("orders").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		panic(err)
	}
	var evs []cdc.Event
	for len(evs) == 0 {
		if evs, err = src.Poll(ctx, evs, 10); err != nil {
			panic(err)
		}
		// Skip high-watermark markers of an idle stream.
		for i := 0; i < len(evs); i++ {
			if evs[i].Op == cdc.OpMarker {
				evs = append(evs[:i], evs[i+1:]...)
				i--
			}
		}
		if len(evs) == 0 {
			select {
			case <-src.Ready():
			case <-ctx.Done():
				panic(ctx.Err())
			}
		}
	}
	fmt.Println(evs[0].Op, evs[0].Namespace)
	// Output: insert shop.orders
}
