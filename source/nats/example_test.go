package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	natssource "github.com/tide-cdc/tide/source/nats"
)

// The JetStream source reads a stream through a durable consumer, in
// stream order; its positions are stream sequences.
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
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		panic(err)
	}
	for _, body := range []string{`{"id":1}`, `{"id":2}`} {
		if _, err := js.Publish(ctx, "orders.eu", []byte(body)); err != nil {
			panic(err)
		}
	}

	src := natssource.New(natssource.Config{Servers: []string{srv.ClientURL()}, Stream: "ORDERS", Consumer: "tide"})
	if err := src.Open(ctx, nil); err != nil {
		panic(err)
	}
	defer src.Close()
	var evs []cdc.Event
	for len(evs) < 2 {
		if evs, err = src.Poll(ctx, evs, 10); err != nil {
			panic(err)
		}
		if len(evs) < 2 {
			select {
			case <-src.Ready():
			case <-ctx.Done():
				panic(ctx.Err())
			}
		}
	}
	for _, ev := range evs {
		var pos struct {
			StreamSeq uint64 `json:"stream_seq"` // and ts, the time the stream stored it
		}
		if err := json.Unmarshal(ev.Pos, &pos); err != nil {
			panic(err)
		}
		fmt.Println(ev.Namespace, string(ev.Payload), pos.StreamSeq)
	}
	// Output:
	// orders.eu {"id":1} 1
	// orders.eu {"id":2} 2
}
