package nats_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	natssink "github.com/tide-cdc/tide/sink/nats"
)

// The JetStream sink publishes each record to a subject made from its
// namespace, with a Nats-Msg-Id from the pipeline and the position, and
// Commit returns once every PubAck arrived.
func Example() {
	store, _ := os.MkdirTemp("", "tide-nats")
	defer os.RemoveAll(store)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: store, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sink := natssink.New(natssink.Config{
		Pipeline: "example", Servers: []string{srv.ClientURL()},
		Stream: "CDC", CreateStream: &natssink.StreamSpec{Subjects: []string{"cdc.>"}},
	})
	if err := sink.Open(ctx, nil); err != nil {
		panic(err)
	}
	defer sink.Close()
	rec := cdc.Record{Event: cdc.Event{Pos: cdc.Position(`{"seq":1}`), Op: cdc.OpInsert, Namespace: "shop.orders"}, Data: []byte(`{"n":1}`)}
	if err := sink.Put(ctx, []cdc.Record{rec}); err != nil {
		panic(err)
	}
	if err := sink.Commit(ctx, cdc.Checkpoint{Source: rec.Pos}); err != nil {
		panic(err)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "CDC")
	if err != nil {
		panic(err)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Subject, string(msg.Data), msg.Header.Get("Nats-Msg-Id") != "")
	// Output: cdc.shop.orders {"n":1} true
}
