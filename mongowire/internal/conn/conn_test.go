package conn

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"

	"github.com/tide-cdc/tide/mongowire/internal/mongoerr"
	"github.com/tide-cdc/tide/mongowire/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a command layer that knows nothing of commands: it answers
// {echo: x} with {echo: x}, {close: 1} with ErrClose, {fail: 1} by
// asking the connection to close after the reply, and {auth: 1} by
// authenticating the connection. It records the connections it opened.
type echo struct {
	mu     sync.Mutex // guards the field below
	opened []Info
}

func (e *echo) Open(info Info) Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opened = append(e.opened, info)
	return &echoSession{}
}

type echoSession struct{ closing, authenticated bool }

func (s *echoSession) Command(_ context.Context, cmd bson.Raw) ([]byte, error) {
	switch cmd.Index(0).Key() {
	case "close":
		return nil, ErrClose
	case "fail":
		s.closing = true
	case "auth":
		s.authenticated = true
	}
	return cmd, nil
}

func (s *echoSession) Authenticated() bool { return s.authenticated }

func (s *echoSession) Hello(_ context.Context, name string, _ bson.Raw) ([]byte, error) {
	return bson.Marshal(bson.D{{Key: "hello", Value: name}})
}

func (s *echoSession) ErrorReply(err *mongoerr.Error) []byte {
	b, _ := bson.Marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: err.Code}})
	return b
}

func (s *echoSession) Closing() bool { return s.closing }

func start(t *testing.T, cfg Config) (*Server, *echo) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 10
	}
	for _, d := range []*time.Duration{&cfg.HeaderTimeout, &cfg.IdleTimeout, &cfg.BodyTimeout} {
		if *d == 0 {
			*d = 10 * time.Second
		}
	}
	h := &echo{}
	s := New(cfg, h)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		s.Wait()
	})
	return s, h
}

func dial(t *testing.T, s *Server) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

func send(t *testing.T, nc net.Conn, doc bson.D) {
	t.Helper()
	b, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(wire.AppendMsg(nil, 1, 0, b)); err != nil {
		t.Fatal(err)
	}
}

func receive(t *testing.T, r io.Reader) bson.Raw {
	t.Helper()
	var hdr [wire.HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("read reply header: %v", err)
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(r, msg[wire.HeaderLen:]); err != nil {
		t.Fatalf("read reply: %v", err)
	}
	m, err := wire.ParseMsg(msg, wire.MaxCommandDepth)
	if err != nil {
		t.Fatalf("parse reply: %v", err)
	}
	return m.Command
}

// closed reports whether the server closed nc without sending anything.
func closed(nc net.Conn) bool {
	_, err := nc.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

func TestRequestReply(t *testing.T) {
	s, h := start(t, Config{})
	nc := dial(t, s)
	r := bufio.NewReader(nc)
	for i := range 3 {
		send(t, nc, bson.D{{Key: "echo", Value: int32(i)}})
		if got := receive(t, r).Lookup("echo").Int32(); got != int32(i) {
			t.Errorf("reply %d: echo = %d", i, got)
		}
	}
	if st := s.Stats(); st.Requests != 3 || st.Current != 1 || st.TotalCreated != 1 || st.BytesIn == 0 || st.BytesOut == 0 {
		t.Errorf("stats = %+v", st)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.opened) != 1 || h.opened[0].ID != 1 || h.opened[0].Remote.String() != nc.LocalAddr().String() {
		t.Errorf("opened %+v, want one connection, id 1, from %s", h.opened, nc.LocalAddr())
	}
}

func TestSessionEndsConnection(t *testing.T) {
	s, _ := start(t, Config{})

	nc := dial(t, s)
	send(t, nc, bson.D{{Key: "close", Value: 1}})
	if !closed(nc) {
		t.Error("ErrClose: the connection stayed open or got a reply")
	}

	nc = dial(t, s)
	r := bufio.NewReader(nc)
	send(t, nc, bson.D{{Key: "fail", Value: 1}})
	receive(t, r) // the reply goes out first
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("Closing: read after the reply = %v, want EOF", err)
	}
}

func TestConnectionCap(t *testing.T) {
	s, _ := start(t, Config{MaxConnections: 1})
	first := dial(t, s)
	send(t, first, bson.D{{Key: "echo", Value: 1}})
	receive(t, first) // the first connection is being served
	if second := dial(t, s); !closed(second) {
		t.Error("a connection beyond the cap was served")
	}
}

func TestHeaderDeadline(t *testing.T) {
	s, _ := start(t, Config{HeaderTimeout: 50 * time.Millisecond})
	if nc := dial(t, s); !closed(nc) {
		t.Error("a silent connection stayed open past the header deadline")
	}
}

func TestBadFraming(t *testing.T) {
	s, _ := start(t, Config{})
	tests := map[string][]byte{
		"length too large": binary.LittleEndian.AppendUint32(nil, wire.MaxMessageLen+1),
		"OP_COMPRESSED":    header(wire.HeaderLen, wire.OpCompressed),
		"unknown opcode":   header(wire.HeaderLen, 9999),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			nc := dial(t, s)
			if len(b) < wire.HeaderLen {
				b = append(b, make([]byte, wire.HeaderLen-len(b))...)
			}
			if _, err := nc.Write(b); err != nil {
				t.Fatal(err)
			}
			if !closed(nc) {
				t.Error("connection stayed open")
			}
		})
	}
}

func header(length, op int32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(length))
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return binary.LittleEndian.AppendUint32(b, uint32(op))
}
