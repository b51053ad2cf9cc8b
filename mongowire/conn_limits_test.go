package mongowire_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/tide-cdc/tide/internal/testenv"
	"github.com/tide-cdc/tide/mongowire"
	"github.com/tide-cdc/tide/mongowire/internal/wire"
)

// helloConn connects to s, sends one hello and reads its reply, as a
// client that then never authenticates.
func helloConn(t *testing.T, s *mongowire.Server) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	hello, err := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(wire.AppendMsg(nil, 1, 0, hello)); err != nil {
		t.Fatal(err)
	}
	var hdr [wire.HeaderLen]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		t.Fatalf("hello reply: %v", err)
	}
	h, err := wire.ParseHeader(hdr[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(h.Length)-wire.HeaderLen); err != nil {
		t.Fatalf("hello reply: %v", err)
	}
	return nc
}

// openFor waits d for the server to close nc, and reports whether it
// did not.
func openFor(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := nc.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// TestIdleUnauthenticatedConnectionsLeaveRoom: with as many idle
// unauthenticated connections as the default MaxConnections (each sent one
// hello), an authenticated driver still connects and runs a command within
// a second. MaxConnectionsPerIP is off here: every connection comes from
// 127.0.0.1 (TestMaxConnectionsPerIP covers that limit).
func TestIdleUnauthenticatedConnectionsLeaveRoom(t *testing.T) {
	s := startAuth(t, func(c *mongowire.Config) { c.MaxConnectionsPerIP = -1 })
	const idle = 1000
	for range idle {
		helloConn(t, s)
	}
	if st := s.ConnStats(); st.Unauthenticated != 64 || st.ClosedUnauthenticated != idle-64 {
		t.Errorf("after %d idle connections: %+v, want 64 unauthenticated, %d closed to make room", idle, st, idle-64)
	}

	begin := time.Now()
	c := testenv.MongoClient(t, userURI(s, "admin", adminPassword, "admin", ""))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := c.Database("app").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("an authenticated client, after %v: %v", time.Since(begin), err)
	}
	t.Logf("connected, authenticated and inserted in %v", time.Since(begin))
	if st := s.ConnStats(); st.Unauthenticated > 64 || st.RefusedMaxConnections != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// TestAuthTimeout: an unauthenticated connection that went idle after its
// hello is closed; the driver's monitoring connection, which checks the
// server but never authenticates, is not, so its pool is never cleared.
func TestAuthTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s := startAuth(t, func(c *mongowire.Config) { c.AuthTimeout = timeout })

	var cleared atomic.Int64
	opts := options.Client().ApplyURI(userURI(s, "admin", adminPassword, "admin", "")).
		SetHeartbeatInterval(500 * time.Millisecond). // the driver's minimum; 10 s by default
		SetPoolMonitor(&event.PoolMonitor{Event: func(e *event.PoolEvent) {
			if e.Type == event.ConnectionPoolCleared {
				cleared.Add(1)
			}
		}})
	c, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	if err := c.Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		nc := helloConn(t, s)
		begin := time.Now()
		if openFor(nc, 5*timeout) {
			t.Fatal("an idle unauthenticated connection stayed open")
		}
		if took := time.Since(begin); took < timeout {
			t.Errorf("closed %v after its hello, want twice the timeout (%v)", took, 2*timeout)
		}
	}
	// The driver's connections lived through four timeouts meanwhile.
	if err := c.Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n := cleared.Load(); n != 0 {
		t.Errorf("the driver's pool was cleared %d times: its monitoring connection was closed", n)
	}
	if st := s.ConnStats(); st.ClosedAuthTimeout != 2 {
		t.Errorf("ClosedAuthTimeout = %d, want 2 (the idle connections)", st.ClosedAuthTimeout)
	}
}

// TestMaxUnauthenticatedConnections: past the cap, the least recently
// active unauthenticated connection gives way to the new one.
func TestMaxUnauthenticatedConnections(t *testing.T) {
	s := startAuth(t, func(c *mongowire.Config) { c.MaxUnauthenticatedConnections = 3 })
	var conns []net.Conn
	for range 4 {
		conns = append(conns, helloConn(t, s))
	}
	if openFor(conns[0], 5*time.Second) {
		t.Error("the fourth unauthenticated connection did not close the first")
	}
	for i, nc := range conns[1:] {
		if !openFor(nc, 10*time.Millisecond) {
			t.Errorf("connection %d was closed", i+1)
		}
	}
	mustConnectAs(t, s, "admin", adminPassword, "admin", "")
	if st := s.ConnStats(); st.Unauthenticated > 3 || st.ClosedUnauthenticated < 1 {
		t.Errorf("stats = %+v, want at most 3 unauthenticated, at least 1 closed to make room", st)
	}
}

// TestMaxConnectionsPerIP: the connection past the cap of its address is
// refused, with or without Auth.
func TestMaxConnectionsPerIP(t *testing.T) {
	for name, auth := range map[string]bool{"auth": true, "no auth": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testenv.MongoWire(t, func(c *mongowire.Config) {
				c.MaxConnections = 12 // a quarter: 3
				c.Auth = auth
				c.AdminUser, c.AdminPassword = "admin", adminPassword
			})
			for range 3 {
				helloConn(t, s)
			}
			nc, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if openFor(nc, 5*time.Second) {
				t.Error("a connection past the per-address cap was served")
			}
			if st := s.ConnStats(); st.RefusedPerIP != 1 || st.Current != 3 {
				t.Errorf("stats = %+v, want 1 refused per address, 3 current", st)
			}
		})
	}
}

// TestConnectionLimitsNeedAuth: without Auth, AuthTimeout and
// MaxUnauthenticatedConnections do not apply.
func TestConnectionLimitsNeedAuth(t *testing.T) {
	s := testenv.MongoWire(t, func(c *mongowire.Config) {
		c.AuthTimeout = 50 * time.Millisecond
		c.MaxUnauthenticatedConnections = 1
	})
	conns := []net.Conn{helloConn(t, s), helloConn(t, s), helloConn(t, s)}
	if !openFor(conns[0], 300*time.Millisecond) {
		t.Fatal("a connection was closed without Auth")
	}
	for _, nc := range conns[1:] {
		if !openFor(nc, 10*time.Millisecond) {
			t.Error("a connection was closed without Auth")
		}
	}
	if st := s.ConnStats(); st != (mongowire.ConnStats{Current: 3}) {
		t.Errorf("stats = %+v, want 3 current and nothing else", st)
	}
}
