// Package mongowiretest starts Tide's embedded MongoDB-compatible server
// for tests, as net/http/httptest does for HTTP servers: on a free
// loopback port, in memory, closed when the test ends. It lives apart from
// package mongowire so that a program embedding the server does not link
// package testing.
package mongowiretest

import (
	"log/slog"
	"testing"

	"github.com/tide-cdc/tide/mongowire"
)

// StartTest starts an in-memory server on a free loopback port for the
// test t and closes it when the test ends (t.Cleanup). A start error fails
// the test at once. Connect with srv.URI().
func StartTest(t testing.TB) *mongowire.Server {
	t.Helper()
	return StartTestWith(t, mongowire.Config{})
}

// StartTestWith is StartTest with a configuration, for example
// Config{EnableTestCommands: true} for configureFailPoint, or a DataDir
// (under t.TempDir()) to restart a server on the same data. An empty Addr
// means a free loopback port, a nil Logger discards the logs.
func StartTestWith(t testing.TB, cfg mongowire.Config) *mongowire.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := mongowire.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatalf("start mongowire server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close mongowire server: %v", err)
		}
	})
	return s
}
