package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tide-cdc/tide/cdc"
	"github.com/tide-cdc/tide/internal/testenv"
)

// natsAddr is where a test's nats-server listens and keeps its streams,
// so that a server started later, or again, is the same server to clients.
type natsAddr struct {
	port  int
	store string
}

func (a natsAddr) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", a.port) }

// freeNATSAddr returns a port nothing listens on and a fresh store.
func freeNATSAddr(t *testing.T) natsAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return natsAddr{port: l.Addr().(*net.TCPAddr).Port, store: t.TempDir()}
}

// stopNATS shuts s down and returns its address, to start it again.
func stopNATS(t *testing.T, s *server.Server) natsAddr {
	t.Helper()
	a := natsAddr{port: s.Addr().(*net.TCPAddr).Port, store: s.JetStreamConfig().StoreDir}
	if filepath.Base(a.store) == server.JetStreamStoreDir {
		a.store = filepath.Dir(a.store) // the server appends it again
	}
	s.Shutdown()
	s.WaitForShutdown()
	return a
}

// startNATSAfter starts a JetStream server at a after d, from a goroutine
// that ends before the test does. The returned channel closes once the
// server is ready (or failed to be: the test then fails).
func startNATSAfter(t *testing.T, a natsAddr, d time.Duration) <-chan struct{} {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: a.port, JetStream: true, StoreDir: a.store, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("new nats-server: %v", err)
	}
	ready := make(chan struct{})
	var startErr error
	go func() {
		defer close(ready)
		time.Sleep(d) // the outage
		s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			startErr = errors.New("nats-server not ready for connections after 10s")
		}
	}()
	t.Cleanup(func() {
		<-ready
		s.Shutdown()
		s.WaitForShutdown()
		if startErr != nil {
			t.Errorf("restart nats-server on port %d: %v", a.port, startErr)
		}
	})
	return ready
}

// warnLogger returns a logger of warnings and above into buf.
func warnLogger(buf *testenv.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// checkStream requires that stream name holds exactly the records with
// positions 0..n-1, once each, in order.
func checkStream(t *testing.T, url, name string, n int) {
	t.Helper()
	nc := connectTo(t, url)
	info, err := streamMsgs(t, nc, name).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(t.Context(), name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(5000))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range int(info.State.Msgs) {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("read stream message %d: %v", i+1, err)
		}
		wantID := fmt.Sprintf(`orders:{"seq":%d}`, i)
		if id := m.Headers().Get("Nats-Msg-Id"); id != wantID || string(m.Data()) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("stream message %d is %s %q, want %s: lost, duplicated or reordered", i+1, id, m.Data(), wantID)
		}
	}
}

// TestCommitRidesOutOutage stops the server for 3s in the middle of a run
// of commits: the server stops while a large batch is being put, and the
// next batch is put while it is down. Every Commit succeeds once the
// server is back on the same port and store, and the stream holds every
// record once, in order.
func TestCommitRidesOutOutage(t *testing.T) {
	srv := testenv.NATS(t)
	url := srv.ClientURL()
	var logs testenv.Buffer
	s := openSink(t, Config{
		Pipeline: "orders", Servers: []string{url}, Stream: "CDC", CreateStream: &StreamSpec{},
		MaxInFlight: 500, Logger: warnLogger(&logs),
	})
	n := 0
	put := func(what string, count int) {
		t.Helper()
		if err := s.Put(t.Context(), records(n, n+count)); err != nil {
			t.Fatalf("put %s: %v", what, err)
		}
		n += count
	}
	commit := func(what string) {
		t.Helper()
		if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
			t.Fatalf("commit %s: %v\n%s", what, err, logs.String())
		}
	}
	for range 3 {
		put("before the outage", 500)
		commit("before the outage")
	}

	// The server stops while this batch is put: of it, some records are
	// stored and acknowledged, some stored with the PubAck lost, some
	// lost, and some put while the client reconnects.
	stopped := make(chan natsAddr)
	go func() { stopped <- stopNATS(t, srv) }()
	put("while the server stops", 20000)
	back := startNATSAfter(t, <-stopped, 3*time.Second)
	commit("of the batch put while the server stopped")

	// This one is put while the server is down, unless it is back already.
	put("during the outage", 500)
	commit("of the batch put during the outage")
	<-back

	for range 2 {
		put("after the outage", 500)
		commit("after the outage")
	}
	if !strings.Contains(logs.String(), "nats unavailable; retrying the batch from its first unacknowledged record") {
		t.Errorf("no commit retried during the outage; logs:\n%s", logs.String())
	}
	checkStream(t, url, "CDC", n)
}

// TestOpenWaitsForNATS opens the sink while no server runs; the server
// starts 2s later, and Open succeeds, having logged that it waits.
func TestOpenWaitsForNATS(t *testing.T) {
	a := freeNATSAddr(t)
	var logs testenv.Buffer
	start := time.Now()
	back := startNATSAfter(t, a, 2*time.Second)
	s := openSink(t, Config{
		Pipeline: "orders", Servers: []string{a.url()}, Stream: "CDC", CreateStream: &StreamSpec{},
		Logger: warnLogger(&logs),
	})
	<-back
	waited := time.Since(start)
	if err := putCommit(t, s, records(0, 10)); err != nil {
		t.Fatal(err)
	}
	checkStream(t, a.url(), "CDC", 10)

	lines := strings.Count(logs.String(), "waiting for nats to become reachable")
	if lines == 0 || !strings.Contains(logs.String(), "servers="+a.url()) {
		t.Errorf("Open did not log that it waits for %s:\n%s", a.url(), logs.String())
	}
	// Once, then at most once every maxBackoff: not a line per attempt.
	if most := 1 + int(waited/maxBackoff); lines > most {
		t.Errorf("Open logged %d waiting lines in %s, want at most %d:\n%s", lines, waited, most, logs.String())
	}
}

// TestMaxOutage keeps the server down past a short max_outage: Open and
// Commit fail, naming the servers without credentials, how long NATS was
// unreachable and max_outage.
func TestMaxOutage(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		a := freeNATSAddr(t)
		withCreds := fmt.Sprintf("nats://alice:s3cret@127.0.0.1:%d", a.port)
		s := New(Config{Pipeline: "orders", Servers: []string{withCreds}, Stream: "CDC", MaxOutage: time.Second, Logger: testLogger(t)})
		var reports []int // the attempts reported to the pipeline (cdc.Retrier)
		s.SetRetry(cdc.RetryPolicy{}, func(attempt int, err error) {
			if err == nil {
				t.Errorf("report(%d, nil) while NATS is away", attempt)
			}
			reports = append(reports, attempt)
		})
		err := s.Open(t.Context(), nil)
		s.Close()
		if err == nil {
			t.Fatal("Open succeeded with no server")
		}
		if len(reports) < 2 || reports[0] != 1 || reports[1] != 2 {
			t.Errorf("retries reported %v, want 1, 2, …", reports)
		}
		for _, want := range []string{"NATS at " + a.url() + " was unreachable for ", "(max_outage 1s)", "no servers available"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open = %v, want it to contain %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
			t.Errorf("Open = %v: the error shows the credentials", err)
		}
	})
	t.Run("open without jetstream", func(t *testing.T) {
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		srv.Start()
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		s := New(Config{Pipeline: "orders", Servers: []string{srv.ClientURL()}, Stream: "CDC", MaxOutage: time.Second, Logger: testLogger(t)})
		err = s.Open(t.Context(), nil)
		s.Close()
		want := "JetStream at " + srv.ClientURL() + " did not answer for "
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(max_outage 1s)") {
			t.Fatalf("Open = %v, want an error containing %q and the max_outage", err, want)
		}
	})
	t.Run("commit", func(t *testing.T) {
		srv := testenv.NATS(t)
		url := srv.ClientURL()
		s := openSink(t, Config{Pipeline: "orders", Servers: []string{url}, Stream: "CDC", CreateStream: &StreamSpec{}, MaxOutage: time.Second})
		if err := putCommit(t, s, records(0, 5)); err != nil {
			t.Fatal(err)
		}
		stopNATS(t, srv)
		err := putCommit(t, s, records(5, 10))
		if err == nil {
			t.Fatal("commit succeeded with the server down")
		}
		for _, want := range []string{"commit 5 records: NATS at " + url + " unavailable for ", "(max_outage 1s), 5 records not acknowledged; last error: "} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Commit = %v, want it to contain %q", err, want)
			}
		}
	})
}

// TestPermanentErrorsFailAtOnce requires that errors a retry cannot fix
// fail the commit without waiting for max_outage (ten minutes here).
func TestPermanentErrorsFailAtOnce(t *testing.T) {
	srv := testenv.NATS(t)
	url := srv.ClientURL()
	js, err := jetstream.New(connectTo(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.>"}, MaxMsgSize: 8}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"subject not captured": {Config{Stream: "CDC", CreateStream: &StreamSpec{Subjects: []string{"cdc.>"}}, Subject: "elsewhere.{coll}"},
			"3 publishes failed, first: subject elsewhere.orders is not captured by stream CDC or any other: publish of position {\"seq\":0}: nats: no response from stream"},
		"message too large": {Config{Stream: "SMALL", Subject: "small.{coll}"},
			"3 publishes failed, first: publish of position {\"seq\":0}: nats: API error: code=400 err_code=10054 description=message size exceeds maximum allowed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Pipeline, tc.cfg.Servers, tc.cfg.MaxOutage = "orders", []string{url}, 10*time.Minute
			s := openSink(t, tc.cfg)
			// Bound the test, not the sink: a retry would run into this.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := s.Put(ctx, records(0, 3)); err != nil {
				t.Fatal(err)
			}
			err := s.Commit(ctx, cdc.Checkpoint{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Commit = %v, want an error containing %q", err, tc.want)
			}
			if ctx.Err() != nil {
				t.Fatalf("Commit = %v: it retried a permanent error", err)
			}
		})
	}
}

// TestPermissionViolationFailsAtOnce publishes to a subject the user may
// not publish to: the server answers with a permissions violation, not a
// PubAck, and Commit fails with it instead of retrying for max_outage.
func TestPermissionViolationFailsAtOnce(t *testing.T) {
	srv := testenv.NATSWithOptions(t, &server.Options{Users: []*server.User{{
		Username: "tide", Password: "pw",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Deny: []string{"cdc.shop.>"}}},
	}}})
	url := fmt.Sprintf("nats://tide:pw@127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
	s := openSink(t, Config{Pipeline: "orders", Servers: []string{url}, Stream: "CDC", CreateStream: &StreamSpec{}, MaxOutage: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Put(ctx, records(0, 3)); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, cdc.Checkpoint{})
	const want = `nats: permissions violation: Permissions Violation for Publish to "cdc.shop.orders"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Commit = %v, want an error containing %q", err, want)
	}
	if ctx.Err() != nil {
		t.Fatalf("Commit = %v: it retried a permission violation", err)
	}
}

// TestCommitKeepsOrderAcrossLostPublishes loses a stretch of what the
// sink publishes, silently, and then the connection, in the middle of a
// large batch; Put goes on while the client reconnects. The stream must
// still hold the batch once and in order: the records published after the
// lost ones must not be stored before them.
func TestCommitKeepsOrderAcrossLostPublishes(t *testing.T) {
	srv := testenv.NATS(t)
	proxy := testenv.StartProxy(t, srv.Addr().String())
	proxy.DropAfter(1<<20, 300*time.Millisecond)
	var logs testenv.Buffer
	s := openSink(t, Config{
		Pipeline: "orders", Servers: []string{"nats://" + proxy.Addr()}, Stream: "CDC", CreateStream: &StreamSpec{},
		MaxInFlight: 500, Logger: warnLogger(&logs),
	})
	const n = 20000 // about 4 MB of messages: the cut comes after 1 MB
	if err := putCommit(t, s, records(0, n)); err != nil {
		t.Fatalf("commit: %v\n%s", err, logs.String())
	}
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d times, want once", proxy.Cuts())
	}
	checkStream(t, srv.ClientURL(), "CDC", n)
}
