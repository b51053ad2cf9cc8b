package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/sink/kafka"
)

// With checkpoint: sink, a program gives the pipeline the sink's
// Checkpoints as its store: Load takes the pipeline's transactional id
// over and reads the checkpoint topic, and each Commit writes the batch
// and the checkpoint in one transaction.
func Example_exactlyOnce() {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cfg := kafka.DefaultConfig()
	cfg.Brokers, cfg.Pipeline = c.ListenAddrs(), "shop"
	sink := kafka.New(cfg)
	store := sink.Checkpoints() // the pipeline's pipeline.Checkpointer
	restored, err := store.Load(ctx, "shop")
	if err != nil {
		panic(err)
	}
	if err := sink.Open(ctx, restored); err != nil {
		panic(err)
	}
	defer sink.Close()
	key, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(7)}})
	rec := cdc.Record{
		Event: cdc.Event{Pos: cdc.Position(`{"seq":1}`), Op: cdc.OpInsert, Namespace: "shop.orders", DocumentKey: key},
		Data:  []byte(`{"n":1}`),
	}
	if err := sink.Put(ctx, []cdc.Record{rec}); err != nil {
		panic(err)
	}
	if err := sink.Commit(ctx, cdc.Checkpoint{Source: rec.Pos}); err != nil {
		panic(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("shop.shop.orders"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	r := cl.PollRecords(ctx, 1).Records()[0]
	fmt.Println(r.Topic, string(r.Key), string(r.Value))
	// Output: shop.shop.orders {"id":"7"} {"n":1}
}
