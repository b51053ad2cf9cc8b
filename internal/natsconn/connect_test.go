package natsconn_test

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tide-cdc/tide/internal/natsconn"
	"github.com/tide-cdc/tide/internal/testenv"
)

// TestConnectRetriesBrokenHandshake: a first connection that reaches the
// server's address and is cut before the handshake ends (here, twice) is
// tried again, and the third gets through; a refused address fails at once.
func TestConnectRetriesBrokenHandshake(t *testing.T) {
	srv := testenv.NATS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() { // closed by the Cleanup above
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) <= 2 {
				c.Close() // the client reads EOF before the server's INFO
				continue
			}
			up, err := net.Dial("tcp", srv.Addr().String())
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	nc, err := natsconn.Connect(natsconn.Config{Servers: []string{"nats://" + ln.Addr().String()}})
	if err != nil {
		t.Fatalf("Connect through two cut handshakes: %v", err)
	}
	nc.Close()
	if got := accepted.Load(); got < 3 {
		t.Errorf("%d connections accepted, want the two cut ones and one more", got)
	}

	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close() // nothing listens there now: connection refused
	if _, err := natsconn.Connect(natsconn.Config{Servers: []string{"nats://" + addr}}); err == nil || !strings.Contains(err.Error(), "connect to nats") {
		t.Errorf("Connect to a closed port: %v, want a connect error", err)
	}
}
