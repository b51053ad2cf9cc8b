// Package testenv starts the real servers that tests talk to: an in-process
// nats-server with JetStream, the embedded MongoDB-compatible server, and a
// real mongod or PostgreSQL when the environment names one. For end-to-end
// tests it builds the tide binary (TideBinary), and its Proxy breaks the
// connections between a client and a server as a failing network would.
package testenv

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// NATS starts an in-process nats-server with JetStream on 127.0.0.1, on a
// random port, storing streams on files in t.TempDir(). It shuts the server
// down when the test ends. Connect with s.ClientURL().
func NATS(t testing.TB) *server.Server {
	t.Helper()
	return NATSWithOptions(t, &server.Options{})
}

// NATSWithOptions is NATS with options of the caller's: Host, Port (unless
// set), JetStream, StoreDir (unless set), NoLog and NoSigs are filled in.
// Restart a server on the same port and store by passing the first one's
// options again (see NATSRestart).
func NATSWithOptions(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	o := *opts
	o.Host = "127.0.0.1"
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	o.JetStream = true
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	o.NoLog = true
	o.NoSigs = true
	s, err := server.NewServer(&o)
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready for connections after 10s")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// NATSRestart shuts s down and starts a new server on the same port and
// store directory, so that clients reconnect and find their streams and
// consumers again. The new server is shut down when the test ends.
func NATSRestart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	js := s.JetStreamConfig()
	if js == nil {
		t.Fatal("restart nats-server: JetStream is not enabled")
	}
	port := s.Addr().(*net.TCPAddr).Port
	store := js.StoreDir
	if filepath.Base(store) == server.JetStreamStoreDir {
		store = filepath.Dir(store) // the server appends it again
	}
	s.Shutdown()
	s.WaitForShutdown()
	return NATSWithOptions(t, &server.Options{Port: port, StoreDir: store})
}
