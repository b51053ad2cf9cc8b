package nats_test

import (
	"context"
	"errors"
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
	natssink "github.com/tide-cdc/tide/sink/nats"
)

// TestContract runs the conformance suite against an in-process
// JetStream server, with a stream of its own for each subtest. The sink
// publishes in Put and waits for the PubAcks in Commit, so a record put
// and not committed may be in the stream already; putting it again after
// a reopen must not duplicate it (Nats-Msg-Id).
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

	var mu sync.Mutex
	streams := map[string]string{}
	stream := func(t *testing.T) string { // one stream per subtest
		mu.Lock()
		defer mu.Unlock()
		if streams[t.Name()] == "" {
			streams[t.Name()] = fmt.Sprintf("CDCTEST%d", len(streams)+1)
		}
		return streams[t.Name()]
	}
	config := func(t *testing.T, url string) natssink.Config {
		name := stream(t)
		return natssink.Config{
			Pipeline: cdctest.Pipeline, Servers: []string{url}, Stream: name,
			Subject:      name + ".{db}.{coll}",
			CreateStream: &natssink.StreamSpec{Subjects: []string{name + ".>"}},
			Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
		}
	}
	cdctest.TestSink(t, cdctest.SinkHarness{
		New: func(t *testing.T) cdc.Sink { return natssink.New(config(t, srv.ClientURL())) },
		Committed: func(t *testing.T) [][]byte {
			st, err := js.Stream(context.Background(), stream(t))
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := st.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var data [][]byte
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
				m, err := st.GetMsg(context.Background(), seq)
				if err != nil {
					t.Fatalf("read message %d of stream %s: %v", seq, stream(t), err)
				}
				data = append(data, m.Data)
			}
			return data
		},
		VisibleBeforeCommit: true,
		FailOpen: func(t *testing.T) cdc.Sink {
			cfg := config(t, "nats://127.0.0.1:1") // nothing listens on port 1
			cfg.MaxOutage = 100 * time.Millisecond
			return natssink.New(cfg)
		},
	})
}
