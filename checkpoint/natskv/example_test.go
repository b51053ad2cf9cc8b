package natskv_test

import (
	"context"
	"errors"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/checkpoint/natskv"
)

// A worker that takes a pipeline over fences its key first; the previous
// owner's next save then fails with ErrNotOwner and its pipeline stops.
func Example() {
	ctx := context.Background()
	nc, err := nats.Connect("nats://n1:4222,nats://n2:4222,nats://n3:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	store, err := natskv.Open(ctx, js, natskv.Config{Replicas: 3})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Fence(ctx, "orders-to-pg", "worker-2"); err != nil {
		log.Fatal(err)
	}
	cp, err := store.Load(ctx, "orders-to-pg") // nil on a fresh start
	if err != nil {
		log.Fatal(err)
	}
	_ = cp // open the source and the sink from it; after each commit:
	next := cdc.Checkpoint{Source: cdc.Position(`{"seq":1}`)}
	if err := store.Save(ctx, "orders-to-pg", next); errors.Is(err, natskv.ErrNotOwner) {
		log.Fatal("another worker took orders-to-pg over: ", err)
	}
}
