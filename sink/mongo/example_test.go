package mongo_test

import (
	"context"
	"fmt"
	"log"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/encode"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/pipeline"
	mongosink "github.com/tide-cdc/tide/sink/mongo"
	"github.com/tide-cdc/tide/source/generate"
)

// Land generated events in MongoDB exactly once: append mode inserts each
// record's envelope as a document, and Checkpoints makes the sink keep the
// pipeline's checkpoint in the target, in each batch's transaction. The
// target here is an embedded server in process.
func Example_exactlyOnce() {
	srv := mongowire.New(mongowire.Config{Addr: "127.0.0.1:0"})
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	sink := mongosink.New(mongosink.Config{
		URI: srv.URI(), Database: "lake", Collection: "events",
		Mode: mongosink.ModeAppend, Pipeline: "generate-to-mongo",
	})
	p := pipeline.New(pipeline.Config{Name: "generate-to-mongo"},
		generate.New(generate.Config{Count: 2500}), encode.Envelope, sink, sink.Checkpoints())
	if err := p.Run(context.Background()); err != nil {
		log.Fatal(err)
	}

	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	n, err := client.Database("lake").Collection("events").CountDocuments(context.Background(), bson.D{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("documents:", n)
	// Output: documents: 2500
}
