package mongowire_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/mongowire"
)

// Start a server in process, watch a collection through the official
// driver, and see an insert arrive on the change stream. In a test,
// mongowiretest.StartTest(t) replaces New, Start and Close.
func Example() {
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"}) // in memory, a free port
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	orders := client.Database("shop").Collection("orders")

	stream, err := orders.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close(context.Background())

	if _, err := orders.InsertOne(ctx, bson.D{{Key: "item", Value: "tea"}, {Key: "qty", Value: 2}}); err != nil {
		log.Fatal(err)
	}
	if !stream.Next(ctx) {
		log.Fatal(stream.Err())
	}
	var change struct {
		OperationType string `bson:"operationType"`
		FullDocument  struct {
			Item string `bson:"item"`
		} `bson:"fullDocument"`
	}
	if err := stream.Decode(&change); err != nil {
		log.Fatal(err)
	}
	fmt.Println(change.OperationType, change.FullDocument.Item)
	// Output: insert tea
}
