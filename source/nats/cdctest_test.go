package nats_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/cdc/cdctest"
	"github.com/tide-cdc/tide/internal/testenv"
	natssource "github.com/tide-cdc/tide/source/nats"
)

// TestContract runs the conformance suite against an in-process
// JetStream server, with a stream and a durable consumer of its own for
// each subtest. The source acknowledges only what the suite acks, as the
// pipeline does after a commit; a restart from a checkpoint must reposition
// the consumer so that what was read after it comes again, once.
func TestContract(t *testing.T) {
	srv := testenv.NATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	type upstream struct {
		stream string
		next   int
	}
	var mu sync.Mutex
	upstreams := map[string]*upstream{}
	of := func(t *testing.T) *upstream {
		mu.Lock()
		defer mu.Unlock()
		u := upstreams[t.Name()]
		if u == nil {
			u = &upstream{stream: fmt.Sprintf("CDCTEST%d", len(upstreams)+1)}
			if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
				Name: u.stream, Subjects: []string{u.stream + ".>"}, Storage: jetstream.FileStorage,
			}); err != nil {
				t.Fatalf("create stream %s: %v", u.stream, err)
			}
			upstreams[t.Name()] = u
		}
		return u
	}
	cdctest.TestSource(t, cdctest.SourceHarness{
		New: func(t *testing.T) cdc.Source {
			return natssource.New(natssource.Config{
				Name: cdctest.Pipeline, Servers: []string{srv.ClientURL()}, Mode: "jetstream",
				Stream: of(t).stream, Consumer: "tide", FetchMaxWait: 200 * time.Millisecond, CloseTimeout: 2 * time.Second,
				Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
		},
		Produce: func(t *testing.T, n int) {
			u := of(t)
			for range n {
				mu.Lock()
				i := u.next
				u.next++
				mu.Unlock()
				if _, err := js.Publish(context.Background(), u.stream+".events", fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
					t.Fatalf("publish %d: %v", i, err)
				}
			}
		},
	})
}
