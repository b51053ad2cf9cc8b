package mongowire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/wire"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir) // never returns: the parent test SIGKILLs it
	}
	goleak.VerifyTestMain(m)
}

// startServer starts a server on a free loopback port, in memory.
func startServer(t testing.TB, opts ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, o := range opts {
		o(&cfg)
	}
	s := New(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, s *Server) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// opMsg builds an OP_MSG with one kind-0 section.
func opMsg(reqID int32, flags uint32, doc []byte) []byte {
	b := make([]byte, 16, 32+len(doc))
	binary.LittleEndian.PutUint32(b[4:], uint32(reqID))
	binary.LittleEndian.PutUint32(b[12:], uint32(wire.OpMsg))
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, 0)
	b = append(b, doc...)
	if flags&wire.FlagChecksumPresent != 0 {
		binary.LittleEndian.PutUint32(b, uint32(len(b)+4))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

// readReply reads one message and returns its header and document.
func readReply(t testing.TB, nc net.Conn) (wire.Header, bson.Raw) {
	t.Helper()
	var hdr [16]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		t.Fatalf("read reply header: %v", err)
	}
	h, err := wire.ParseHeader(hdr[:])
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, h.Length-16)
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatalf("read reply body: %v", err)
	}
	switch h.OpCode {
	case wire.OpMsg:
		if flags := binary.LittleEndian.Uint32(body); flags != 0 || body[4] != 0 {
			t.Fatalf("reply flags %#x, section kind %d", flags, body[4])
		}
		return h, bson.Raw(body[5:])
	case wire.OpReply:
		if n := binary.LittleEndian.Uint32(body[16:]); n != 1 {
			t.Fatalf("OP_REPLY numberReturned = %d", n)
		}
		return h, bson.Raw(body[20:])
	}
	t.Fatalf("reply opcode %d", h.OpCode)
	return h, nil
}

// roundTrip sends cmd as OP_MSG and returns the reply.
func roundTrip(t testing.TB, nc net.Conn, cmd any) bson.Raw {
	t.Helper()
	if _, err := nc.Write(opMsg(1, 0, marshal(t, cmd))); err != nil {
		t.Fatal(err)
	}
	_, reply := readReply(t, nc)
	return reply
}

// expectClosed asserts that the server closes nc without sending anything.
func expectClosed(t testing.TB, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := nc.Read(make([]byte, 1))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection not closed by the server: read %d bytes, err %v", n, err)
	}
}

func wantError(t testing.TB, reply bson.Raw, code int32, msg string) {
	t.Helper()
	if ok := reply.Lookup("ok").AsFloat64(); ok != 0 {
		t.Fatalf("reply %v: ok = %v, want 0", reply, ok)
	}
	got, isInt32 := reply.Lookup("code").Int32OK()
	if !isInt32 || got != code {
		t.Fatalf("reply %v: code = %v, want Int32 %d", reply, reply.Lookup("code"), code)
	}
	if reply.Lookup("codeName").StringValue() != mongoerr.Name(code) {
		t.Fatalf("reply %v: codeName, want %s", reply, mongoerr.Name(code))
	}
	if !strings.Contains(reply.Lookup("errmsg").StringValue(), msg) {
		t.Fatalf("reply %v: errmsg does not contain %q", reply, msg)
	}
}

var ping = bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}

func TestLengthOutOfBoundsCloses(t *testing.T) {
	s := startServer(t)
	for name, length := range map[string]uint32{"too short": 15, "zero": 0, "too long": wire.MaxMessageLen + 1, "negative": 0xffffffff} {
		t.Run(name, func(t *testing.T) {
			nc := dial(t, s)
			hdr := make([]byte, 16)
			binary.LittleEndian.PutUint32(hdr, length)
			binary.LittleEndian.PutUint32(hdr[12:], uint32(wire.OpMsg))
			nc.Write(hdr)
			expectClosed(t, nc)
		})
	}
}

func TestDeadlines(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.HeaderTimeout = 50 * time.Millisecond
		c.IdleTimeout = 150 * time.Millisecond
		c.BodyTimeout = 50 * time.Millisecond
	})
	t.Run("first header", func(t *testing.T) {
		nc := dial(t, s) // sends nothing
		expectClosed(t, nc)
	})
	t.Run("body", func(t *testing.T) {
		nc := dial(t, s)
		msg := opMsg(1, 0, marshal(t, ping))
		nc.Write(msg[:20]) // the header and a little: the rest never comes
		expectClosed(t, nc)
	})
	t.Run("idle", func(t *testing.T) {
		nc := dial(t, s)
		start := time.Now()
		if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
			t.Fatalf("ping: %v", r)
		}
		expectClosed(t, nc)
		// The idle deadline, longer than the first-header one, applied.
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Fatalf("closed after %v, before the idle timeout", d)
		}
	})
}

// A message that has begun is under the body deadline, even mid-header:
// half a header cannot hold a connection for the idle timeout.
func TestPartialHeaderUnderBodyDeadline(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.IdleTimeout = time.Hour
		c.BodyTimeout = 50 * time.Millisecond
	})
	nc := dial(t, s)
	if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("ping: %v", r)
	}
	nc.Write(opMsg(2, 0, marshal(t, ping))[:8]) // half a header, then silence
	expectClosed(t, nc)
}

func TestConnectionCap(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.MaxConnections = 2
		c.MaxConnectionsPerIP = -1 // a quarter of 2 would refuse b: its own test is TestMaxConnectionsPerIP
	})
	a, b := dial(t, s), dial(t, s)
	for _, nc := range []net.Conn{a, b} { // both are being served
		if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
			t.Fatalf("ping: %v", r)
		}
	}
	c := dial(t, s)
	expectClosed(t, c)
	a.Close()
	// Once a slot is free, a new client is served again. The server
	// notices a's close asynchronously, so retry until it has.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := dial(t, s)
		d.Write(opMsg(1, 0, marshal(t, ping)))
		var hdr [16]byte
		if _, err := io.ReadFull(d, hdr[:]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted after one closed")
		}
	}
}

func TestTooDeepCommandKeepsConnection(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	var v any = bson.D{{Key: "x", Value: 1}}
	for range wire.MaxCommandDepth + 5 {
		v = bson.D{{Key: "a", Value: v}}
	}
	reply := roundTrip(t, nc, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: v}, {Key: "$db", Value: "d"}})
	wantError(t, reply, mongoerr.Overflow, "maximum nested object depth")
	if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("ping after the error: %v", r)
	}
}

func TestMalformedMessages(t *testing.T) {
	s := startServer(t)
	pingDoc := marshal(t, ping)
	tests := map[string]struct {
		msg       []byte
		code      int32
		errmsg    string
		keepsConn bool
	}{
		"malformed BSON": {
			msg: func() []byte {
				d := bytes.Clone(pingDoc)
				d[4] = 0x33 // not a BSON type
				return opMsg(1, 0, d)
			}(),
			code: mongoerr.InvalidBSON, errmsg: "unknown element type", keepsConn: true,
		},
		"unknown required flag": {
			msg:  opMsg(1, 1<<4, pingDoc),
			code: mongoerr.BadValue, errmsg: "unknown required flag bits",
		},
		"bad checksum": {
			msg: func() []byte {
				m := opMsg(1, wire.FlagChecksumPresent, pingDoc)
				m[len(m)-2] ^= 1
				return m
			}(),
			code: mongoerr.BadValue, errmsg: "checksum mismatch",
		},
		"unknown section kind": {
			msg: func() []byte {
				m := opMsg(1, 0, pingDoc)
				m = append(m, 7, 5, 0, 0, 0)
				binary.LittleEndian.PutUint32(m, uint32(len(m)))
				return m
			}(),
			code: mongoerr.BadValue, errmsg: "unknown kind 7",
		},
		"no $db": {
			msg:  opMsg(1, 0, marshal(t, bson.D{{Key: "ping", Value: 1}})),
			code: 40571, errmsg: "$db", keepsConn: true,
		},
		"unknown command": {
			msg:  opMsg(1, 0, marshal(t, bson.D{{Key: "frobnicate", Value: 1}, {Key: "$db", Value: "x"}})),
			code: mongoerr.CommandNotFound, errmsg: "no such command: 'frobnicate'", keepsConn: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nc := dial(t, s)
			nc.Write(tc.msg)
			h, reply := readReply(t, nc)
			if h.ResponseTo != 1 {
				t.Errorf("responseTo = %d, want 1", h.ResponseTo)
			}
			wantError(t, reply, tc.code, tc.errmsg)
			if tc.keepsConn {
				if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
					t.Fatalf("ping after the error: %v", r)
				}
			} else {
				expectClosed(t, nc)
			}
		})
	}
}

func TestChecksumAccepted(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	nc.Write(opMsg(9, wire.FlagChecksumPresent, marshal(t, ping)))
	h, reply := readReply(t, nc) // readReply refuses a checksum flag on the reply
	if h.ResponseTo != 9 || reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("reply %v to %d", reply, h.ResponseTo)
	}
}

func TestMoreToComeSendsNoReply(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	nc.Write(opMsg(1, wire.FlagMoreToCome, marshal(t, bson.D{{Key: "frobnicate", Value: 1}, {Key: "$db", Value: "x"}})))
	nc.Write(opMsg(2, 0, marshal(t, ping)))
	// The first reply on the wire answers the second request.
	h, reply := readReply(t, nc)
	if h.ResponseTo != 2 || reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("got reply %v to request %d, want the ping's", reply, h.ResponseTo)
	}
}

func TestCompressedCloses(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	m := make([]byte, 16+9)
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	binary.LittleEndian.PutUint32(m[12:], uint32(wire.OpCompressed))
	binary.LittleEndian.PutUint32(m[16:], uint32(wire.OpMsg))
	binary.LittleEndian.PutUint32(m[20:], 1<<30) // an attacker-sized uncompressed size
	nc.Write(m)
	expectClosed(t, nc)
}

func opQuery(t testing.TB, coll string, q any) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b[4:], 3)
	binary.LittleEndian.PutUint32(b[12:], uint32(wire.OpQuery))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, coll...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, ^uint32(0))
	b = append(b, marshal(t, q)...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func TestLegacyHandshake(t *testing.T) {
	s := startServer(t, func(c *Config) { c.ReplSet = "rsX" })
	nc := dial(t, s)
	nc.Write(opQuery(t, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}, {Key: "compression", Value: bson.A{"zstd", "snappy"}}}))
	h, reply := readReply(t, nc)
	if h.OpCode != wire.OpReply || h.ResponseTo != 3 {
		t.Fatalf("handshake reply opcode %d to %d", h.OpCode, h.ResponseTo)
	}
	if !reply.Lookup("ismaster").Boolean() || !reply.Lookup("helloOk").Boolean() || reply.Lookup("setName").StringValue() != "rsX" {
		t.Fatalf("handshake reply %v", reply)
	}
	if _, err := reply.LookupErr("topologyVersion"); err == nil {
		t.Error("topologyVersion sent without awaitable hello")
	}
	if _, err := reply.LookupErr("compression"); err == nil {
		t.Error("compression advertised")
	}
	// Wrapped in $query, as mongos-style clients send it.
	nc.Write(opQuery(t, "admin.$cmd", bson.D{{Key: "$query", Value: bson.D{{Key: "hello", Value: 1}}}}))
	if _, reply = readReply(t, nc); reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("$query-wrapped hello: %v", reply)
	}
	// Any other OP_QUERY is refused, as MongoDB 6+ does.
	nc.Write(opQuery(t, "test.c", bson.D{{Key: "x", Value: 1}}))
	_, reply = readReply(t, nc)
	wantError(t, reply, mongoerr.UnsupportedOpQueryCommand, "Unsupported OP_QUERY")
	nc.Write(opQuery(t, "admin.$cmd", bson.D{{Key: "find", Value: "c"}}))
	_, reply = readReply(t, nc)
	wantError(t, reply, mongoerr.UnsupportedOpQueryCommand, "Unsupported OP_QUERY command: find")
}

func TestHandlerPanicIsInternalError(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"})
	s.commands["boom"] = command{run: func(context.Context, *conn, *request) (bson.D, error) { panic("kaboom") }}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nc := dial(t, s)
	reply := roundTrip(t, nc, bson.D{{Key: "boom", Value: 1}, {Key: "$db", Value: "x"}})
	wantError(t, reply, mongoerr.InternalError, "kaboom")
	if r := roundTrip(t, nc, ping); r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("ping after a panic: %v", r)
	}
}

func TestLargeMessageReadIncrementally(t *testing.T) {
	s := startServer(t)
	nc := dial(t, s)
	// A 5 MB command arrives in pieces; the server must assemble it.
	big := strings.Repeat("x", 5<<20)
	msg := opMsg(4, 0, marshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "pad", Value: big}, {Key: "$db", Value: "admin"}}))
	go func() {
		for i := 0; i < len(msg); i += 1 << 20 {
			nc.Write(msg[i:min(i+1<<20, len(msg))])
		}
	}()
	h, reply := readReply(t, nc)
	if h.ResponseTo != 4 || reply.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("reply %v", reply)
	}
}

func TestCloseInterruptsBlockedCommand(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", EnableTestCommands: true})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	admin := dial(t, s)
	r := roundTrip(t, admin, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 60_000}}},
		{Key: "$db", Value: "admin"}})
	if r.Lookup("ok").AsFloat64() != 1 {
		t.Fatalf("configureFailPoint: %v", r)
	}
	blocked := dial(t, s)
	blocked.Write(opMsg(1, 0, marshal(t, bson.D{{Key: "find", Value: "c"}, {Key: "$db", Value: "d"}})))
	// Wait until the find has entered the fail point (a state, not a timing).
	for entered := int64(0); entered == 0; {
		s.failpoints.mu.Lock()
		entered = s.failpoints.points["failCommand"].entered
		s.failpoints.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %v: it waited for the blocked command", d)
	}
	expectClosed(t, blocked)
}

func TestConfigDefaults(t *testing.T) {
	s := New(Config{})
	want := Config{
		Addr: "127.0.0.1:27017", ReplSet: "rs0", MaxConnections: 1000, MaxConnectionsPerIP: 250,
		AuthTimeout: 10 * time.Second, MaxUnauthenticatedConnections: 64,
		HeaderTimeout: 30 * time.Second, IdleTimeout: 10 * time.Minute, BodyTimeout: 30 * time.Second,
		CursorTimeout:    10 * time.Minute,
		AuthFailureLimit: 10, AuthFailureDelay: 100 * time.Millisecond, AuthFailureMaxDelay: 5 * time.Second,
	}
	got := s.cfg
	got.Logger = nil
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	if err := s.Close(); err != nil { // never started: nothing to close
		t.Fatal(err)
	}
}
