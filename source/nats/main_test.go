package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childNATSEnv); spec != "" {
		runChildNATS(spec) // a nats-server for a test to SIGKILL; never returns
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testenv.RemoveTideBinary()
		os.Exit(code)
	}))
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func connectTo(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newStream creates a file-storage stream capturing subjects.
func newStream(t testing.TB, nc *nats.Conn, name string, subjects ...string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	return js
}

// publishJSON publishes messages {"n":from}...{"n":to-1} to subject and
// waits for every PubAck.
func publishJSON(t testing.TB, js jetstream.JetStream, subject string, from, to int) {
	t.Helper()
	publish(t, js, subject, from, to, func(i int) []byte { return fmt.Appendf(nil, `{"n":%d}`, i) })
}

func publish(t testing.TB, js jetstream.JetStream, subject string, from, to int, data func(i int) []byte) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := js.PublishAsync(subject, data(i)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if (i-from)%1000 == 999 {
			waitPublished(t, js)
		}
	}
	waitPublished(t, js)
}

func waitPublished(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishes not acknowledged within 30s")
	}
}

// pollN polls src until it handed out n events, waiting on Ready.
func pollN(t testing.TB, src cdc.Source, n int) []cdc.Event {
	t.Helper()
	var got []cdc.Event
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for len(got) < n {
		var err error
		got, err = src.Poll(t.Context(), got, n-len(got))
		if err != nil {
			t.Fatalf("poll after %d of %d events: %v", len(got), n, err)
		}
		if len(got) < n {
			select {
			case <-src.Ready():
			case <-deadline.C:
				t.Fatalf("got %d of %d events within 30s", len(got), n)
			}
		}
	}
	return got
}

// number returns the "n" of a {"n":N} payload.
func number(t testing.TB, ev cdc.Event) int {
	t.Helper()
	var v struct{ N int }
	if err := json.Unmarshal(ev.Payload, &v); err != nil {
		t.Fatalf("payload %q: %v", ev.Payload, err)
	}
	return v.N
}

func streamSeq(t testing.TB, ev cdc.Event) uint64 {
	t.Helper()
	p, err := parseJSPos(ev.Pos)
	if err != nil {
		t.Fatal(err)
	}
	return p.StreamSeq
}

func consumerInfo(t testing.TB, js jetstream.JetStream, stream, consumer string) *jetstream.ConsumerInfo {
	t.Helper()
	info, err := tryConsumerInfo(js, stream, consumer)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func tryConsumerInfo(js jetstream.JetStream, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	c, err := js.Consumer(context.Background(), stream, consumer)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", consumer, err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return nil, fmt.Errorf("consumer %s info: %w", consumer, err)
	}
	return info, nil
}

// eventually retries cond every 20ms for up to 15s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 15s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling an external server's state
	}
}

func jsConfig(t testing.TB, nc *nats.Conn, stream, consumer string) Config {
	return Config{
		Name: "test", Conn: nc, Mode: "jetstream", Stream: stream, Consumer: consumer,
		FetchMaxWait: 200 * time.Millisecond, Logger: testLogger(t), CloseTimeout: 2 * time.Second,
	}
}

func openSource(t testing.TB, cfg Config, restored *cdc.Checkpoint) *Source {
	t.Helper()
	src := New(cfg)
	if err := src.Open(t.Context(), restored); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func itoa(i int) string { return strconv.Itoa(i) }
