package natssink

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

	"github.com/tide-cdc/tide/internal/cdc"
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
func warnLogger(buf *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// checkStream requires that stream name holds exactly the records with
// positions 0..n-1, once each, in order.
func checkStream(t *testing.T, url, name string, n int) {
	t.Helper()
	st := streamMsgs(t, connectTo(t, url), name)
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	for seq := uint64(1); seq <= info.State.Msgs; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("stream seq %d: %v", seq, err)
		}
		wantID := fmt.Sprintf(`orders:{"seq":%d}`, seq-1)
		if id := m.Header.Get("Nats-Msg-Id"); id != wantID || string(m.Data) != fmt.Sprintf(`{"n":%d}`, seq-1) {
			t.Fatalf("stream seq %d holds %s %q, want %s: lost, duplicated or reordered", seq, id, m.Data, wantID)
		}
	}
}

// TestCommitRidesOutOutage stops the server for 3s in the middle of a run
// of commits, one batch published just before it stops and the next put
// while it is down: every Commit succeeds once the server is back on the
// same port and store, and the stream holds every record once, in order.
func TestCommitRidesOutOutage(t *testing.T) {
	srv := testenv.NATS(t)
	url := srv.ClientURL()
	var logs lockedBuffer
	s := openSink(t, Config{
		Pipeline: "orders", Servers: []string{url}, Stream: "CDC", CreateStream: &StreamSpec{},
		Logger: warnLogger(&logs),
	})
	const batch = 1000
	n := 0
	commit := func(what string) {
		t.Helper()
		if err := s.Commit(t.Context(), cdc.Checkpoint{}); err != nil {
			t.Fatalf("commit %s: %v\n%s", what, err, logs.String())
		}
	}
	for range 3 {
		if err := s.Put(t.Context(), records(n, n+batch)); err != nil {
			t.Fatal(err)
		}
		n += batch
		commit("before the outage")
	}

	// This batch is in flight when the server stops: some of it may be
	// stored, acknowledged or not, and the rest lost.
	if err := s.Put(t.Context(), records(n, n+batch)); err != nil {
		t.Fatal(err)
	}
	n += batch
	back := startNATSAfter(t, stopNATS(t, srv), 3*time.Second)
	commit("of the batch in flight at the outage")

	// This one is put while the server is down, unless it is back already.
	if err := s.Put(t.Context(), records(n, n+batch)); err != nil {
		t.Fatalf("put during the outage: %v", err)
	}
	n += batch
	commit("of the batch put during the outage")
	<-back

	for range 2 {
		if err := s.Put(t.Context(), records(n, n+batch)); err != nil {
			t.Fatal(err)
		}
		n += batch
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
	var logs lockedBuffer
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
		err := s.Open(t.Context(), nil)
		s.Close()
		if err == nil {
			t.Fatal("Open succeeded with no server")
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
